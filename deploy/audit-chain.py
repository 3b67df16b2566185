#!/usr/bin/env python3
"""Recompute an outbox archive's logs of batches from the store alone, as an auditor does.

Needs nothing of the archiver: Python 3's standard library and a copy of the archive's objects
(`aws s3 sync s3://BUCKET/PREFIX ./copy`, or a file:// store as it is). For every app of the
table (`{table}/_log/app_code={app}/`: one folder per app, named once when its log began — its
code in lowercase, or exactly where the table's app codes compared case-sensitively then and
`Pay` and `pay` were two apps, or `{that}~{n}` for an app whose code named an older app's log
folder already: its batches are under `app_code={code}/`), it

  1. reads the checkpoint (C2SP tlog-checkpoint: origin, tree size, base64 root; a signature
     line after a blank line when a log key signs it — check it with Go's note package or
     deploy/verify-log.go, this script does not);
  2. reads every hash tile and entry bundle (C2SP tlog-tiles, height 8) the tree of that size
     has, recomputes each leaf hash SHA-256(0x00 || entry) from its entry, every tile of the
     levels above from the tiles below (SHA-256(0x01 || left || right)), and the root, and holds
     it to the checkpoint's — RFC 6962's Merkle tree hash;
  3. reads each entry — "outbox-archive-log/v1\\n{table}\\n{app}\\n{batch_id}\\n{manifest_sha256}\\n"
     — and checks that its batch's manifest.json is in the copy and hashes to what the entry
     binds, and the data object to what the manifest says;
  4. where the log carries on a linear chain of an older build (transition.json), recomputes
     that chain's links from the log's first leaves and holds the last to the chain's newest
     checkpoint;
  5. honours the breaks operators accepted (breaks/*.json: leaves whose receipts are gone on
     purpose — a batch whose objects were lost, archived again — whose objects need not be in
     the copy) and prints each, with its reason; prints too what transition.json says was
     accepted of the linear chain (a chain not carried over, and why; breaks the older build
     accepted, past which the chain was carried);
  6. lists every batch folder the copy holds that no leaf names (a batch whose run ended before
     its receipt, or before appending) as a note, not a problem.
  7. names as a problem (log_pending, formerly chain_unanchored) a linear chain of an older build (`_chain/`) that no
     log carries over yet: nothing of that app is checked here until the new build's first
     archive of it carries the chain over;
  8. holds the checkpoint to the largest tree head the log was published at (heads/: every
     checkpoint an archive run wrote, kept write-once under its size) and, with --seen, to the
     checkpoint each given statement saw: a smaller tree, or one that does not grow from that
     head (its first leaves another tree), is log_rollback (formerly chain_rollback) — the checkpoint written back.

A tile that is not full is read from its `.p/{width}` object or, where a later append replaced
it, from the first hashes of a wider one or the full tile (C2SP: a tile's first hashes never
change).

It prints, per app, the tree head (size and root) — a statement's `log.size` and `log.root` in
its checkpoint must be this one or, with a consistency proof, an earlier head of the same tree
— and exits 1 on any problem, 0 when every log recomputes, 2 when it audited nothing: a folder
that does not exist or holds no folder of the table (a wrong path or table name), named.

    deploy/audit-chain.py [--seen STATEMENT ...] ./copy wallet_outbox
"""

import base64
import hashlib
import json
import os
import sys

ENTRY_SCHEMA = "outbox-archive-log/v1"
BREAK_SCHEMA = "outbox-archive-log-break/v1"
LEGACY_SCHEMA = "outbox-archive-chain/v1"
GENESIS = "0" * 64
WIDTH = 256


def leaf_hash(entry):
    return hashlib.sha256(b"\x00" + entry).digest()


def node_hash(left, right):
    return hashlib.sha256(b"\x01" + left + right).digest()


def subtree(hashes):
    while len(hashes) > 1:
        hashes = [node_hash(hashes[i], hashes[i + 1]) for i in range(0, len(hashes), 2)]
    return hashes[0]


def tree_hash(leaves):
    """RFC 6962 MTH, from a list of leaf hashes, without recursion depth limits."""
    if not leaves:
        return hashlib.sha256(b"").digest()
    stack = []  # (height, hash) of complete subtrees, largest first
    for h in leaves:
        node = (0, h)
        while stack and stack[-1][0] == node[0]:
            height, left = stack.pop()
            node = (height + 1, node_hash(left, node[1]))
        stack.append(node)
    root = stack[-1][1]
    for _, left in reversed(stack[:-1]):
        root = node_hash(left, root)
    return root


def index_path(n):
    groups = [f"{n % 1000:03d}"]
    n //= 1000
    while n > 0:
        groups.append(f"x{n % 1000:03d}")
        n //= 1000
    return "/".join(reversed(groups))


def tile_path(level, n, width):
    return f"tile/{level}/{index_path(n)}" + ("" if width == WIDTH else f".p/{width}")


def entries_path(n, width):
    return f"tile/entries/{index_path(n)}" + ("" if width == WIDTH else f".p/{width}")


def read_tile(folder, path_of, n, width, split):
    """The first `width` items of tile `n` (`split` cuts an object into items): its own `.p/{width}`
    object, else the full tile, else the narrowest wider partial one."""
    candidates = [path_of(n, width)]
    if width != WIDTH:
        candidates.append(path_of(n, WIDTH))
        partials = os.path.join(folder, path_of(n, WIDTH) + ".p")
        wider = sorted(int(w) for w in (os.listdir(partials) if os.path.isdir(partials) else [])
                       if w.isdigit() and int(w) > width)
        candidates += [path_of(n, w) for w in wider[:1]]
    for path in candidates:
        full = os.path.join(folder, path)
        if os.path.exists(full):
            items = split(read(full))
            return items[:width] if len(items) >= width else items
    raise OSError(f"{path_of(n, width)}: no such tile, nor a wider one")


def hashes_of(data):
    return [data[i:i + 32] for i in range(0, len(data), 32)]


def checkpoint_body(text):
    """(origin, size, root) of a checkpoint note's text."""
    body = text.split("\n\n", 1)[0].split("\n")
    return body[0], int(body[1]), base64.b64decode(body[2], validate=True)


def seen_heads(folder, origin, seen):
    """The heads the log was seen at before: the largest of heads/ and each statement's."""
    out = []
    heads = os.path.join(folder, "heads")
    names = sorted(n for n in (os.listdir(heads) if os.path.isdir(heads) else [])
                   if len(n) == 17 and n.isdigit())
    if names:
        name = names[0]  # named 99999999999999999 - size: the largest head first
        try:
            o, size, root = checkpoint_body(read(os.path.join(heads, name)).decode())
            if o == origin and size == 99999999999999999 - int(name):
                out.append((size, root, f"the store keeps a head of {size} (heads/{name})"))
            else:
                out.append((None, None, f"heads/{name} is not the head its name says"))
        except (OSError, ValueError, IndexError, UnicodeDecodeError) as e:
            out.append((None, None, f"heads/{name} cannot be read: {e}"))
    for path, checkpoints in seen:
        if origin in checkpoints:
            size, root = checkpoints[origin]
            out.append((size, root, f"the statement {path} saw {size}"))
    return out


def unbundle(data):
    out, at = [], 0
    while at < len(data):
        if at + 2 > len(data):
            raise ValueError("a truncated entry length")
        size = int.from_bytes(data[at:at + 2], "big")
        out.append(data[at + 2:at + 2 + size])
        at += 2 + size
    if at != len(data):
        raise ValueError("a truncated entry")
    return out


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def legacy_link(table, app, seq, prev, batch_id, manifest_sha256):
    text = f"{LEGACY_SCHEMA}\n{table}\n{app}\n{seq}\n{prev}\n{batch_id}\n{manifest_sha256}\n"
    return hashlib.sha256(text.encode()).hexdigest()


def read(path):
    with open(path, "rb") as f:
        return f.read()


def audit_log(table, app, folder, batches, problems, seen=()):
    """One app's log: its leaves as (index, batch_id, manifest_sha256)."""
    origin = f"outbox-archive/{table}/app_code={app}"
    try:
        text = read(os.path.join(folder, "checkpoint")).decode()
        found, size, root = checkpoint_body(text)
        if found != origin:
            problems.append(f"log_fork (formerly chain_fork): {app}: the checkpoint is of log {found!r}, not {origin!r}")
            return []
    except (OSError, ValueError, IndexError, UnicodeDecodeError) as e:
        problems.append(f"log_fork (formerly chain_fork): {app}: the checkpoint cannot be read: {e}")
        return []
    accepted = {}
    breaks_dir = os.path.join(folder, "breaks")
    for name in sorted(os.listdir(breaks_dir)) if os.path.isdir(breaks_dir) else []:
        try:
            b = json.loads(read(os.path.join(breaks_dir, name)))
            if (b.get("schema"), b.get("table"), b.get("app_code")) != (BREAK_SCHEMA, table, app):
                problems.append(f"{app}: break record {name} is not one of this log")
                continue
            for index, batch_id in b["leaves"]:
                accepted[index] = batch_id
            leaves = ", ".join(f"{i} (batch {batch})" for i, batch in b["leaves"])
            print(f"{app}: leaves {leaves} accepted as gone: {b['reason']}")
        except (OSError, ValueError, KeyError, TypeError) as e:
            problems.append(f"{app}: break record {name} cannot be read: {e}")
    transition = None
    if os.path.exists(os.path.join(folder, "transition.json")):
        try:
            transition = json.loads(read(os.path.join(folder, "transition.json")))
        except (OSError, ValueError) as e:
            problems.append(f"log_mismatch (formerly chain_mismatch): {app}: transition.json cannot be read: {e}")
    leaves, full = [], [[]]
    entries_out = []
    for n in range((size + WIDTH - 1) // WIDTH):
        width = min(WIDTH, size - n * WIDTH)
        try:
            hashes = read_tile(folder, lambda i, w: tile_path(0, i, w), n, width, hashes_of)
            entries = read_tile(folder, entries_path, n, width, unbundle)
        except (OSError, ValueError) as e:
            problems.append(f"log_mismatch (formerly chain_mismatch): {app} leaf {n * WIDTH}: tile {n} cannot be read: {e}")
            return []
        if len(hashes) != width or len(entries) != width:
            problems.append(f"log_mismatch (formerly chain_mismatch): {app} leaf {n * WIDTH}: tile {n} does not hold {width} leaves")
            return []
        for i, (h, e) in enumerate(zip(hashes, entries)):
            index = n * WIDTH + i
            if leaf_hash(e) != h:
                problems.append(f"log_mismatch (formerly chain_mismatch): {app} leaf {index}: its hash in the tile is not its entry's (rewritten)")
            fields = e.decode(errors="replace").split("\n")
            if len(fields) != 6 or fields[0] != ENTRY_SCHEMA or fields[1] != table or fields[2] != app or fields[5] != "":
                problems.append(f"log_mismatch (formerly chain_mismatch): {app} leaf {index}: not an entry of this log")
                fields = [None, None, None, "?", "?", ""]
            entries_out.append((index, fields[3], fields[4]))
            leaves.append(h)
        if width == WIDTH:
            full[0].append(subtree(hashes))
    level = 1
    while size >> (8 * level):
        count = size >> (8 * level)
        below, this = full[level - 1], []
        for n in range((count + WIDTH - 1) // WIDTH):
            width = min(WIDTH, count - n * WIDTH)
            try:
                stored = read_tile(folder, lambda i, w: tile_path(level, i, w), n, width, hashes_of)
            except (OSError, ValueError) as e:
                problems.append(f"log_mismatch (formerly chain_mismatch): {app}: tile {level}/{n} cannot be read: {e}")
                return entries_out
            if stored != below[n * WIDTH:n * WIDTH + width]:
                problems.append(f"log_mismatch (formerly chain_mismatch): {app}: tile {level}/{n} is not the hashes of the tiles below it (rewritten)")
            if width == WIDTH:
                this.append(subtree(stored))
        full.append(this)
        level += 1
    computed = tree_hash(leaves)
    if computed != root:
        problems.append(f"log_fork (formerly chain_fork): {app}: the checkpoint's root {base64.b64encode(root).decode()} is not the tree of its tiles ({base64.b64encode(computed).decode()})")
    for seen_size, seen_root, where in seen_heads(folder, origin, seen):
        if seen_size is None:
            problems.append(f"log_rollback (formerly chain_rollback): {app}: {where}")
        elif seen_size > size:
            problems.append(f"log_rollback (formerly chain_rollback): {app}: the checkpoint holds {size} leaves, {where}: the checkpoint was written back (the batches of leaves {size}..{seen_size} may be gone with their receipts)")
        elif tree_hash(leaves[:seen_size]) != seen_root:
            problems.append(f"log_rollback (formerly chain_rollback): {app}: the checkpoint's tree does not grow from the head {where.replace('saw ', 'saw, of ')}: its first {seen_size} leaves are another tree")
    if transition and transition.get("legacy_head_seq"):
        head_seq, link = transition["legacy_head_seq"], GENESIS
        for index, batch_id, manifest in entries_out[:head_seq]:
            link = legacy_link(table, app.lower(), index + 1, link, batch_id, manifest)
        if len(entries_out) < head_seq or link != transition.get("legacy_head_link"):
            problems.append(f"log_mismatch (formerly chain_mismatch): {app}: the log's first {head_seq} leaves do not recompute the linear chain's head link (chain seq {head_seq}: {transition.get('legacy_head_link')}, is not the log's leaf {head_seq - 1})")
        key = transition.get("legacy_checkpoint") or ""
        legacy = os.path.join(folder, "..", "..", "_chain", f"app_code={app}", key.rsplit("/", 1)[-1])
        try:
            c = json.loads(read(legacy))
            if c["links"][-1]["seq"] != head_seq or c["links"][-1]["link"] != transition.get("legacy_head_link"):
                problems.append(f"log_mismatch (formerly chain_mismatch): {app}: the linear chain's checkpoint {key} does not end at the head transition.json names")
        except (OSError, ValueError, KeyError, IndexError, TypeError) as e:
            problems.append(f"log_mismatch (formerly chain_mismatch): {app}: the linear chain's checkpoint {key} cannot be read: {e}")
        print(f"{app}: carries on the linear chain to seq {head_seq} link {link}")
    for key in (transition or {}).get("legacy_breaks") or []:
        print(f"{app}: the linear chain was carried over past a break its older build accepted ({key}): the checkpoints it names were an abandoned branch")
    if transition and not transition.get("legacy_head_seq") and transition.get("reason"):
        print(f"{app}: the linear chain of an older build was NOT carried over (accepted): {transition['reason']}")
    for index, batch_id, manifest_sha256 in entries_out:
        where = batches.get(code_of(app), {}).get(batch_id)
        if where is None and accepted.get(index) == batch_id:
            continue  # removed on purpose, accepted: its objects may be gone
        if where is None:
            problems.append(f"log_gap (formerly chain_gap): {app} leaf {index}: batch {batch_id} is not in the store")
            continue
        manifest_path = os.path.join(where, "manifest.json")
        if not os.path.exists(manifest_path) or sha256_file(manifest_path) != manifest_sha256:
            problems.append(f"log_mismatch (formerly chain_mismatch): {app} leaf {index}: manifest of batch {batch_id} is not the one logged")
            continue
        try:
            manifest = json.loads(read(manifest_path))
            data_path = os.path.join(where, os.path.basename(manifest["data_object_key"]))
            whole = os.path.exists(data_path) and sha256_file(data_path) == manifest["gzip_sha256"]
        except (OSError, ValueError, KeyError, TypeError):
            whole = False
        if not whole:
            problems.append(f"{app} leaf {index}: the data object of batch {batch_id} is not the one its manifest hashes")
    print(f"{app}: tree of {size} leaves, root {base64.b64encode(root).decode()}")
    return entries_out


def code_of(folder):
    """The app code (lowercase) whose batch folders a log folder's leaves are in: the folder's
    name without a `~{n}` suffix (a second log under one name; no app code holds a `~`)."""
    return folder.split("~", 1)[0].lower()


def refusal(root, table):
    """Why the copy cannot be audited as given (a wrong folder or table), or None."""
    if not os.path.isdir(root):
        return f"{root}: no such folder (the copy of the store's prefix: aws s3 sync s3://BUCKET/PREFIX ./copy)"
    table_dir = os.path.join(root, table)
    if os.path.isdir(table_dir):
        return None
    held = sorted(n for n in os.listdir(root) if os.path.isdir(os.path.join(root, n)))
    return (
        f"{root} holds no folder {table}: not the copy of a store prefix with that table's archive "
        f"(its folders: {', '.join(held) if held else 'none'}; the copy of s3://BUCKET/PREFIX holds one folder per table)"
    )


def main(root, table, seen=()):
    table_dir = os.path.join(root, table)
    log_dir = os.path.join(table_dir, "_log")
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
    logged = sorted(
        n[len("app_code="):] for n in (os.listdir(log_dir) if os.path.isdir(log_dir) else [])
    )
    bound = {}
    for app in logged:
        for _, batch_id, _ in audit_log(table, app, os.path.join(log_dir, f"app_code={app}"), batches, problems, seen):
            bound.setdefault(code_of(app), set()).add(batch_id)
    # A linear chain of an older build that no log carries over yet (the store copied between
    # the upgrade and the app's first archive by the new build): this script checks logs only,
    # so nothing of that app was checked, and it must not look as if it had been.
    chain_dir = os.path.join(table_dir, "_chain")
    chained = sorted(
        n[len("app_code="):] for n in (os.listdir(chain_dir) if os.path.isdir(chain_dir) else [])
        if n.startswith("app_code=")
    )
    for app in chained:
        if code_of(app) not in {code_of(a) for a in logged}:
            problems.append(
                f"log_pending (formerly chain_unanchored): {app}: the store holds a linear chain of an older build "
                f"(_chain/app_code={app}/) that no log carries over yet: nothing of it was checked "
                f"(this script checks logs; the new build's first archive of the app carries the chain over)"
            )
    for code in sorted(batches):
        if code not in {code_of(a) for a in logged}:
            print(f"{code}: no log")
        for batch_id in sorted(set(batches[code]) - bound.get(code, set())):
            print(f"{code}: note: batch {batch_id} is in the store but in no leaf (its run ended before its receipt or before appending; verify lists orphans)")
    for p in problems:
        print(f"PROBLEM {p}")
    return 1 if problems else 0


def statement_heads(path):
    """The checkpoint a statement (`outbox-archiver attest`) saw of each log: origin -> (size, root)."""
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    if not str(doc.get("schema", "")).startswith("outbox-archive-attestation/"):
        raise ValueError("not a statement outbox-archiver attest printed")
    out = {}
    for app in doc.get("apps", []):
        origin, size, root = checkpoint_body(app["log"]["checkpoint"])
        out[origin] = (size, root)
    return out


if __name__ == "__main__":
    args, seen = sys.argv[1:], []
    while len(args) >= 2 and args[0] == "--seen":
        try:
            seen.append((args[1], statement_heads(args[1])))
        except (OSError, ValueError, KeyError, IndexError, TypeError) as e:
            print(f"--seen {args[1]}: {e}", file=sys.stderr)
            sys.exit(2)
        args = args[2:]
    if len(args) != 2:
        print(f"usage: {sys.argv[0]} [--seen STATEMENT ...] ARCHIVE_COPY_DIR TABLE", file=sys.stderr)
        sys.exit(2)
    why = refusal(args[0], args[1])
    if why:
        print(f"nothing audited: {why}", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(args[0], args[1], seen))
