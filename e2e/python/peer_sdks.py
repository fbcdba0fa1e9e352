"""Calls Shoal through other APIs' own Python SDKs (Cohere, OpenAI, LangChain, Hugging Face).

Reads {base, key, embed, rerank, prompted, texts, query} as JSON on stdin and prints what each SDK
returned as JSON; e2e/peer-sdks.test.ts compares it with Shoal's own Embed and Rerank answers.
"""

import json
import sys

import cohere
import openai
from huggingface_hub import InferenceClient
from langchain_cohere import CohereRerank
from langchain_core.documents import Document
from langchain_openai import OpenAIEmbeddings

args = json.load(sys.stdin)
base, key, texts, query = args["base"], args["key"], args["texts"], args["query"]
EMBED, RERANK, PROMPTED = args["embed"], args["rerank"], args["prompted"]
out = {}


def error_of(call):
    """The status code and class name of an SDK call that must fail."""
    try:
        call()
    except Exception as err:  # noqa: BLE001 - each SDK has its own error classes
        return {"status": getattr(err, "status_code", None), "type": type(err).__name__, "message": str(err)[:300]}
    return None


# Cohere v2 and v1 clients.
co2 = cohere.ClientV2(api_key=key, base_url=base)
e2 = co2.embed(model=PROMPTED, texts=texts, input_type="search_document", embedding_types=["float", "int8", "uint8", "binary", "ubinary"])
out["cohere_v2_embed"] = {
    "float": e2.embeddings.float_,
    "int8": e2.embeddings.int8,
    "uint8": e2.embeddings.uint8,
    "binary": e2.embeddings.binary,
    "ubinary": e2.embeddings.ubinary,
    "texts": e2.texts,
    "input_tokens": e2.meta.billed_units.input_tokens,
}
out["cohere_v2_embed_query"] = co2.embed(model=PROMPTED, texts=[query], input_type="search_query", embedding_types=["float"]).embeddings.float_
r2 = co2.rerank(model=RERANK, query=query, documents=texts, top_n=2)
out["cohere_v2_rerank"] = [{"index": r.index, "score": r.relevance_score} for r in r2.results]
co1 = cohere.Client(api_key=key, base_url=base)
e1 = co1.embed(texts=texts, model=PROMPTED, input_type="classification")
out["cohere_v1_embed"] = {"response_type": e1.response_type, "float": e1.embeddings}
r1 = co1.rerank(model=RERANK, query=query, documents=texts, return_documents=True)
out["cohere_v1_rerank"] = [{"index": r.index, "score": r.relevance_score, "text": r.document.text} for r in r1.results]
out["cohere_errors"] = {
    "unknown_model": error_of(lambda: co2.embed(model="no-such-model", texts=texts, input_type="search_query", embedding_types=["float"])),
    "too_long_none": error_of(
        lambda: co2.embed(model=EMBED, texts=["fish " * 2000], input_type="search_query", embedding_types=["float"], truncate="NONE")
    ),
    "bad_key": error_of(lambda: cohere.ClientV2(api_key="sk-wrong-0000000000000", base_url=base).rerank(model=RERANK, query=query, documents=texts)),
}

# OpenAI.
oa = openai.OpenAI(base_url=f"{base}/v1", api_key=key, max_retries=0)
out["openai_float"] = [d.embedding for d in oa.embeddings.create(model=EMBED, input=texts, encoding_format="float").data]
out["openai_default"] = [d.embedding for d in oa.embeddings.create(model=EMBED, input=texts).data]
out["openai_mrl_16"] = oa.embeddings.create(model=PROMPTED, input=texts[0], dimensions=16, encoding_format="float").data[0].embedding
out["openai_errors"] = {"dimensions_not_matryoshka": error_of(lambda: oa.embeddings.create(model=EMBED, input="x", dimensions=3))}

# LangChain.
lc_embed = OpenAIEmbeddings(model=EMBED, base_url=f"{base}/v1", api_key=key, check_embedding_ctx_length=False, max_retries=0)
out["langchain_openai_documents"] = lc_embed.embed_documents(texts)
out["langchain_openai_query"] = lc_embed.embed_query(query)
lc_rerank = CohereRerank(model=RERANK, cohere_api_key=key, base_url=base, top_n=3)
ranked = lc_rerank.compress_documents([Document(page_content=t) for t in texts], query)
out["langchain_cohere_rerank"] = [{"text": d.page_content, "score": d.metadata["relevance_score"]} for d in ranked]

# Hugging Face's client against the TEI routes (a URL as the model: no Hub involved).
hf = InferenceClient(model=f"{base}/embed", token=key)
out["hf_feature_extraction"] = hf.feature_extraction(texts[1]).tolist()

json.dump(out, sys.stdout)
