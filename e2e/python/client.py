#!/usr/bin/env python3
"""A plain grpcio client for a Shoal gateway, on stubs generated from proto/ by grpcio-tools.

Reads a JSON list of texts on stdin, calls ModelService.ListModels and InferenceService.Embed
(float and packed little-endian float32 vectors), an Embed for an unknown model, and, when given
their models, Rerank (the first text as the query, the rest as documents) and Classify, then
prints one JSON object. Put the generated stubs on PYTHONPATH:

    python -m grpc_tools.protoc -I proto --python_out=OUT --grpc_python_out=OUT \
        shoal/v1/common.proto shoal/v1/inference.proto shoal/v1/model.proto
    echo '["hello world"]' | PYTHONPATH=OUT python e2e/python/client.py --target 127.0.0.1:8080
"""
import argparse
import json
import struct
import sys

import grpc
from shoal.v1 import inference_pb2, inference_pb2_grpc, model_pb2, model_pb2_grpc


def unpack_float32_le(data: bytes) -> list:
    return list(struct.unpack("<%df" % (len(data) // 4), data))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", required=True, help="gateway host:port (h2c)")
    parser.add_argument("--model", help="model id; default: the first listed")
    parser.add_argument("--timeout", type=float, default=20.0, help="deadline per call, seconds")
    parser.add_argument("--rerank-model", help="a rerank model id: also call Rerank")
    parser.add_argument("--classify-model", help="a classification model id: also call Classify")
    args = parser.parse_args()
    texts = json.load(sys.stdin)

    with grpc.insecure_channel(args.target) as channel:
        models = model_pb2_grpc.ModelServiceStub(channel)
        inference = inference_pb2_grpc.InferenceServiceStub(channel)

        listed = models.ListModels(model_pb2.ListModelsRequest(), timeout=args.timeout)
        model = args.model or listed.models[0].id

        res = inference.Embed(inference_pb2.EmbedRequest(model=model, inputs=texts), timeout=args.timeout)
        packed = inference.Embed(
            inference_pb2.EmbedRequest(
                model=model,
                inputs=texts,
                options=inference_pb2.EmbedOptions(encoding=inference_pb2.VECTOR_ENCODING_FLOAT32_LE),
            ),
            timeout=args.timeout,
        )
        try:
            inference.Embed(inference_pb2.EmbedRequest(model="no-such-model", inputs=["x"]), timeout=args.timeout)
            unknown_model = "OK"
        except grpc.RpcError as err:
            unknown_model = err.code().name

        reranked = None
        if args.rerank_model:
            rr = inference.Rerank(
                inference_pb2.RerankRequest(model=args.rerank_model, query=texts[0], documents=texts[1:]),
                timeout=args.timeout,
            )
            reranked = [{"index": r.index, "score": r.score} for r in rr.results]
        classified = None
        if args.classify_model:
            cr = inference.Classify(inference_pb2.ClassifyRequest(model=args.classify_model, inputs=texts), timeout=args.timeout)
            classified = [{lab.label: lab.score for lab in c.labels} for c in cr.classifications]

    json.dump(
        {
            "models": [{"id": m.id, "dimensions": m.dimensions} for m in listed.models],
            "model": res.model,
            "embeddings": [list(e.values) for e in res.embeddings],
            "packed": [unpack_float32_le(e.float32_le) for e in packed.embeddings],
            "tokens": [e.tokens for e in res.embeddings],
            "prompt_tokens": res.usage.prompt_tokens,
            "unknown_model": unknown_model,
            "reranked": reranked,
            "classified": classified,
        },
        sys.stdout,
    )


if __name__ == "__main__":
    main()
