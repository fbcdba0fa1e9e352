"""Runs a batch through Shoal's OpenAI-compatible Batch API with the official `openai` SDK.

Reads {base, key, jsonl} as JSON on stdin: uploads the JSONL text with files.create(purpose="batch"),
creates an /v1/embeddings batch, polls batches.retrieve until it is final, downloads the output with
files.content, and prints {status, counts, output, listed} as JSON for e2e/batch.test.ts.
"""

import io
import json
import sys
import time

import openai

args = json.load(sys.stdin)
client = openai.OpenAI(base_url=args["base"], api_key=args["key"], max_retries=0)

uploaded = client.files.create(file=("input.jsonl", io.BytesIO(args["jsonl"].encode())), purpose="batch")
batch = client.batches.create(input_file_id=uploaded.id, endpoint="/v1/embeddings", completion_window="24h")
deadline = time.monotonic() + 120
while batch.status not in ("completed", "failed", "cancelled", "expired"):
    if time.monotonic() > deadline:
        raise SystemExit(f"batch {batch.id} still {batch.status} after 120 s")
    time.sleep(0.25)
    batch = client.batches.retrieve(batch.id)

output = []
if batch.output_file_id is not None:
    text = client.files.content(batch.output_file_id).text
    output = [json.loads(line) for line in text.splitlines() if line]
listed = any(b.id == batch.id for b in client.batches.list(limit=100).data)
counts = batch.request_counts.model_dump() if batch.request_counts is not None else {}
json.dump({"status": batch.status, "counts": counts, "output": output, "listed": listed}, sys.stdout)
