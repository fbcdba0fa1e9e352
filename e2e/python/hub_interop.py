"""huggingface_hub's side of e2e/hub-cache-interop.test.ts.

`download`: snapshot_download from HF_ENDPOINT into HF_HUB_CACHE. `read`: the same call offline
(run with HF_HUB_OFFLINE=1), then hf_hub_download per file and a scan of the cache. Prints JSON.
"""

import argparse
import hashlib
import json
import os

from huggingface_hub import hf_hub_download, scan_cache_dir, snapshot_download


def sha256(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["download", "read"])
    parser.add_argument("--repo", required=True)
    parser.add_argument("--revision", default="main")
    parser.add_argument("--allow", action="append", default=None)
    parser.add_argument("--file", action="append", default=[])
    args = parser.parse_args()

    snapshot = snapshot_download(args.repo, revision=args.revision, allow_patterns=args.allow)
    out: dict = {"snapshot": snapshot, "offline": os.environ.get("HF_HUB_OFFLINE")}
    if args.command == "read":
        out["files"] = {name: sha256(hf_hub_download(args.repo, name, revision=args.revision)) for name in args.file}
        cache = scan_cache_dir()
        out["warnings"] = [str(w) for w in cache.warnings]
        out["repos"] = [
            {
                "repo_id": repo.repo_id,
                "revisions": [{"commit": r.commit_hash, "refs": sorted(r.refs), "files": sorted(f.file_path.relative_to(r.snapshot_path).as_posix() for f in r.files)} for r in repo.revisions],
            }
            for repo in cache.repos
        ]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
