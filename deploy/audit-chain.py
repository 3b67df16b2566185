#!/usr/bin/env python3
"""Recompute an outbox archive's chains from the store alone, as an auditor does.

Needs nothing of the archiver: Python 3's standard library and a copy of the archive's objects
(`aws s3 sync s3://BUCKET/PREFIX ./copy`, or a file:// store as it is). For every app of the
table, it

  1. reads the app's checkpoints (`{table}/_chain/app_code={app}/*.json`: one folder per app, its
     code in lowercase — or exactly, where the table's app codes compare case-sensitively and
     `Pay` and `pay` are two apps) and recomputes every link from the one before it:
     link(seq) = SHA-256 of
     "outbox-archive-chain/v1\\n{table}\\n{app in lowercase}\\n{seq}\\n{link(seq-1)}\\n{batch_id}\\n{manifest_sha256}\\n"
     with link(0) = 64 zeros — checkpoints that disagree on a seq are a fork;
  2. finds each linked batch's manifest.json and `_SUCCESS` in the copy and checks that the
     manifest hashes to what its link binds, and the data object to what the manifest says;
  3. lists every batch folder the copy holds that no link binds — a batch whose run ended before
     its receipt (an orphan `verify` lists too) or before anchoring — as a note, not a problem;
  4. honours the breaks operators accepted (`*-break-*.json`: the checkpoints of an abandoned
     branch, and receipts removed from the database on purpose — a batch whose objects were
     lost, archived again — whose objects need not be in the copy) and prints each, with its
     reason.

It prints, per app, the anchored head (seq and link; of the branch that goes on) — the statement's
`chain_head_at_end` must be at or before it on the same chain — and exits 1 on any problem, 0
when every chain recomputes.

    deploy/audit-chain.py ./copy wallet_outbox
"""

import hashlib
import json
import os
import sys

SCHEMA = "outbox-archive-chain/v1"
BREAK_SCHEMA = "outbox-archive-chain-break/v1"
GENESIS = "0" * 64


def link(table, app, seq, prev, batch_id, manifest_sha256):
    text = f"{SCHEMA}\n{table}\n{app}\n{seq}\n{prev}\n{batch_id}\n{manifest_sha256}\n"
    return hashlib.sha256(text.encode()).hexdigest()


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def main(root, table):
    table_dir = os.path.join(root, table)
    chain_dir = os.path.join(table_dir, "_chain")
    problems = []
    # Every batch folder of the copy: app (lowercase) -> batch id -> folder. A batch id names
    # its app's exact spelling, so looking one up among every spelling of a code is exact.
    batches = {}
    for name in sorted(os.listdir(table_dir)):
        if not name.startswith("app_code="):
            continue
        app = name[len("app_code="):].lower()
        for day in sorted(os.listdir(os.path.join(table_dir, name))):
            day_dir = os.path.join(table_dir, name, day)
            if not day.startswith("dt=") or not os.path.isdir(day_dir):
                continue
            for batch_id in sorted(os.listdir(day_dir)):
                batches.setdefault(app, {})[batch_id] = os.path.join(day_dir, batch_id)
    # The apps: one per chain folder (named as the archiver names it), and a code with batches
    # but no chain folder in any case.
    chained = sorted(
        n[len("app_code="):] for n in (os.listdir(chain_dir) if os.path.isdir(chain_dir) else [])
    )
    apps = chained + sorted(a for a in batches if a not in {c.lower() for c in chained})
    bound = {}  # lowercase app -> batch ids some link binds
    for app in apps:
        links = {}  # seq -> (batch_id, manifest_sha256, link)
        folder = os.path.join(chain_dir, f"app_code={app}")
        names = sorted(os.listdir(folder)) if os.path.isdir(folder) else []
        abandoned = set()
        dropped = {}  # seq -> (batch_id, link): receipts removed from the database on purpose
        for name in [n for n in names if "-break-" in n]:
            try:
                with open(os.path.join(folder, name), "rb") as f:
                    b = json.loads(f.read())
                if (b.get("schema"), b.get("table"), b.get("app_code")) != (BREAK_SCHEMA, table, app):
                    problems.append(f"{app}: break record {name} is not one of this chain")
                    continue
                abandoned.update(k.rsplit("/", 1)[-1] for k in b["abandoned"])
                for l in b.get("dropped", []):
                    dropped[l["seq"]] = (l["batch_id"], l["link"])
                removed = "".join(
                    f", receipt removed on purpose at seq {l['seq']} (batch {l['batch_id']})"
                    for l in b.get("dropped", [])
                )
                print(f"{app}: break accepted from seq {b['from_seq']} ({len(b['abandoned'])} checkpoint(s) abandoned{removed}): {b['reason']}")
            except (OSError, ValueError, KeyError, TypeError) as e:
                problems.append(f"{app}: break record {name} cannot be read: {e}")
        for name in [n for n in names if "-break-" not in n and n not in abandoned]:
            try:
                with open(os.path.join(folder, name), "rb") as f:
                    c = json.loads(f.read())
                ok = (c.get("schema"), c.get("table"), c.get("app_code")) == (SCHEMA, table, app)
                seqs_in = [l["seq"] for l in c["links"]]
                numbered = bool(seqs_in) and seqs_in == list(range(c["from_seq"], c["to_seq"] + 1))
            except (OSError, ValueError, KeyError, TypeError) as e:
                problems.append(f"chain_mismatch: {app}: {name} cannot be read as a checkpoint: {e}")
                continue
            if not ok or not numbered:
                problems.append(f"chain_mismatch: {app}: {name} is not a stretch of this chain")
                continue
            prev = c["prev_link"]
            if c["from_seq"] == 1 and prev != GENESIS:
                problems.append(f"chain_mismatch: {app}: {name} starts at seq 1 but not from the genesis")
            before = links.get(c["from_seq"] - 1)
            if before and before[2] != prev:
                problems.append(f"chain_fork: {app} seq {c['from_seq']}: {name} continues from another link")
            for l in c["links"]:
                want = link(table, app.lower(), l["seq"], prev, l["batch_id"], l["manifest_sha256"])
                if want != l["link"]:
                    problems.append(f"chain_mismatch: {app} seq {l['seq']} in {name} does not recompute")
                seen = links.get(l["seq"])
                if seen and seen[2] != l["link"]:
                    problems.append(f"chain_fork: {app} seq {l['seq']}: batch {seen[0]} and batch {l['batch_id']}")
                links.setdefault(l["seq"], (l["batch_id"], l["manifest_sha256"], l["link"]))
                prev = l["link"]
        seqs = sorted(links)
        missing = sorted(set(range(1, seqs[-1] + 1)) - set(seqs)) if seqs else []
        if missing:
            problems.append(f"chain_gap: {app} seqs {missing} are in no checkpoint")
        for seq in seqs:
            batch_id, manifest_sha256, _ = links[seq]
            bound.setdefault(app.lower(), set()).add(batch_id)
            where = batches.get(app.lower(), {}).get(batch_id)
            if where is None and dropped.get(seq) == (batch_id, links[seq][2]):
                continue  # removed on purpose, accepted: its objects may be gone
            if where is None:
                problems.append(f"chain_gap: {app} seq {seq}: batch {batch_id} is not in the store")
                continue
            manifest_path = os.path.join(where, "manifest.json")
            if not os.path.exists(manifest_path) or sha256_file(manifest_path) != manifest_sha256:
                problems.append(f"chain_mismatch: {app} seq {seq}: manifest of batch {batch_id} is not the one linked")
                continue
            try:
                with open(manifest_path, "rb") as f:
                    manifest = json.loads(f.read())
                data_path = os.path.join(where, os.path.basename(manifest["data_object_key"]))
                whole = os.path.exists(data_path) and sha256_file(data_path) == manifest["gzip_sha256"]
            except (OSError, ValueError, KeyError, TypeError):
                whole = False
            if not whole:
                problems.append(f"{app} seq {seq}: the data object of batch {batch_id} is not the one its manifest hashes")
        if seqs:
            print(f"{app}: anchored head seq {seqs[-1]} link {links[seqs[-1]][2]} ({len(seqs)} links)")
        else:
            print(f"{app}: no checkpoints")
    for code in sorted(batches):
        for batch_id in sorted(set(batches[code]) - bound.get(code, set())):
            print(f"{code}: note: batch {batch_id} is in the store but in no checkpoint (its run ended before its receipt or before anchoring; verify lists orphans)")
    for p in problems:
        print(f"PROBLEM {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(f"usage: {sys.argv[0]} ARCHIVE_COPY_DIR TABLE")
    sys.exit(main(sys.argv[1], sys.argv[2]))
