// Command verify-log checks an outbox archive's statement (`outbox-archiver attest --format
// json`) with Go's own transparency-log code — golang.org/x/mod/sumdb/tlog and
// golang.org/x/mod/sumdb/note, the checksum database's — not this project's: for every app, the
// checkpoint it carries (its signature, with -verifier), that the tree head at the period's end
// is a prefix of the checkpoint's tree and the head at its start a prefix of that one
// (consistency proofs), and that every batch of the period is the leaf its statement says it is
// (an inclusion proof of the entry rebuilt from the batch's fields), and that the checkpoint's
// tree grew from every head the statement says the log was seen at before (heads_seen). With
// -previous, the previous statement's heads at its end must be this one's at its start, and its
// checkpoint a head this one proves its checkpoint grew from (`attest --previous`): a
// checkpoint written back (a rollback) or another tree is refused.
//
// A statement may name batches whose latest check (`outbox-archiver verify`) found them other
// than recorded — an object missing, bytes or checksums that differ — and so does not vouch
// for them (`unresolved_findings`, listed in `batches_with_unresolved_findings`): each is
// printed with what the check found, and the exit status is 1 even when every proof holds.
//
//	go run deploy/verify-log.go -verifier 'NAME+HASH+KEY' [-previous last.json] statement.json
//
// With golang.org/x/mod in GOPATH (Debian: golang-golang-x-mod-dev; GO111MODULE=off
// GOPATH=/usr/share/gocode), or in a module that requires it.
package main

import (
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

type head struct {
	Size int64  `json:"size"`
	Root string `json:"root"`
}

// seen is a tree head the log was seen at before the statement, with the consistency proof
// from it to the statement's checkpoint.
type seen struct {
	Size         int64    `json:"size"`
	Root         string   `json:"root"`
	Source       string   `json:"source"`
	ToCheckpoint []string `json:"to_checkpoint"`
}

type finding struct {
	Kind     string  `json:"kind"`
	Key      *string `json:"key"`
	EventID  *string `json:"event_id"`
	Expected *string `json:"expected"`
	Actual   *string `json:"actual"`
}

type batch struct {
	BatchID            string   `json:"batch_id"`
	ManifestSHA256     string   `json:"manifest_sha256"`
	LeafIndex          int64    `json:"leaf_index"`
	InclusionProof     []string `json:"inclusion_proof"`
	UnresolvedFindings *struct {
		FoundAt string    `json:"found_at"`
		Count   int       `json:"count"`
		First   []finding `json:"first"`
	} `json:"unresolved_findings"`
}

type app struct {
	AppCode string `json:"app_code"`
	Log     struct {
		AppCode         string   `json:"app_code"`
		Origin          string   `json:"origin"`
		Checkpoint      string   `json:"checkpoint"`
		Size            int64    `json:"size"`
		AtStart         head     `json:"at_start"`
		AtEnd           head     `json:"at_end"`
		StartToEnd      []string `json:"start_to_end"`
		EndToCheckpoint []string `json:"end_to_checkpoint"`
		HeadsSeen       []seen   `json:"heads_seen"`
	} `json:"log"`
	Days []struct {
		BatchList []batch `json:"batch_list"`
	} `json:"days"`
}

type statement struct {
	Table      string `json:"table"`
	Apps       []app  `json:"apps"`
	Unresolved []struct {
		AppCode string `json:"app_code"`
		BatchID string `json:"batch_id"`
	} `json:"batches_with_unresolved_findings"`
}

// describe is a finding as verify's summary words it: kind, key, event, expected and found.
func describe(f finding) string {
	text := f.Kind
	if f.Key != nil {
		text += " at " + *f.Key
	}
	if f.EventID != nil {
		text += " (event " + *f.EventID + ")"
	}
	if f.Expected != nil && f.Actual != nil {
		text += ": expected " + *f.Expected + ", found " + *f.Actual
	}
	return text
}

func load(path string) statement {
	data, err := os.ReadFile(path)
	if err != nil {
		fail("%v", err)
	}
	var s statement
	if err := json.Unmarshal(data, &s); err != nil {
		fail("%s: not a statement: %v", path, err)
	}
	return s
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "verify-log: "+format+"\n", args...)
	os.Exit(1)
}

func hash(text string) tlog.Hash {
	b, err := base64.StdEncoding.DecodeString(text)
	if err != nil || len(b) != tlog.HashSize {
		fail("%q is not a base64 SHA-256 hash", text)
	}
	var h tlog.Hash
	copy(h[:], b)
	return h
}

func hashes(texts []string) []tlog.Hash {
	out := make([]tlog.Hash, len(texts))
	for i, t := range texts {
		out[i] = hash(t)
	}
	return out
}

// checkpoint reads a C2SP checkpoint: with a verifier, note.Open checks its signature. It also
// says what was checked of the signature, for the success line.
func checkpoint(text, origin string, verifiers note.Verifiers) (int64, tlog.Hash, string) {
	body := text
	signed := "its signature not checked (no -verifier)"
	if verifiers != nil {
		if !strings.Contains(text, "\n\n\u2014 ") {
			fail("%s: the checkpoint carries no signature at all, and -verifier was given: the log was not signed when this statement was made (or its signature was removed)", origin)
		}
		n, err := note.Open([]byte(text), verifiers)
		if err != nil {
			fail("%s: the checkpoint's signature does not verify: %v", origin, err)
		}
		body = n.Text
		names := []string{}
		for _, s := range n.Sigs {
			names = append(names, s.Name)
		}
		signed = fmt.Sprintf("its signature by %s checked", strings.Join(names, " and "))
	}
	lines := strings.SplitN(body, "\n", 4)
	if len(lines) < 4 || lines[0] != origin {
		fail("%s: not a checkpoint of this log: %q", origin, body)
	}
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil {
		fail("%s: the checkpoint's size %q", origin, lines[1])
	}
	return size, hash(lines[2]), signed
}

func main() {
	verifierKey := flag.String("verifier", "", "the log's verifier key (name+hash+key), or several separated by commas while a key is rotated: the checkpoint must carry a signature by one of them")
	previous := flag.String("previous", "", "the previous statement: its heads at the end must be this one's at the start, and this one's checkpoint a tree grown from its checkpoint")
	flag.Parse()
	if flag.NArg() != 1 {
		fail("usage: verify-log [-verifier KEY] [-previous STATEMENT] STATEMENT")
	}
	var verifiers note.Verifiers
	if *verifierKey != "" {
		var list []note.Verifier
		for _, text := range strings.Split(*verifierKey, ",") {
			v, err := note.NewVerifier(strings.TrimSpace(text))
			if err != nil {
				fail("-verifier: %v", err)
			}
			list = append(list, v)
		}
		verifiers = note.VerifierList(list...)
	}
	s := load(flag.Arg(0))
	ends := map[string]head{}
	saw := map[string]head{}
	if *previous != "" {
		for _, a := range load(*previous).Apps {
			ends[a.Log.AppCode] = a.Log.AtEnd
			size, root, _ := checkpoint(a.Log.Checkpoint, a.Log.Origin, nil)
			saw[a.Log.AppCode] = head{Size: size, Root: base64.StdEncoding.EncodeToString(root[:])}
		}
	}
	unresolved := map[string]bool{}
	for _, a := range s.Apps {
		l := a.Log
		size, root, signed := checkpoint(l.Checkpoint, l.Origin, verifiers)
		if size != l.Size {
			fail("%s: the checkpoint holds %d leaves, the statement says %d", l.AppCode, size, l.Size)
		}
		end, start := hash(l.AtEnd.Root), hash(l.AtStart.Root)
		if l.AtEnd.Size > 0 {
			if err := tlog.CheckTree(hashes(l.EndToCheckpoint), size, root, l.AtEnd.Size, end); err != nil {
				fail("%s: the head at the period's end (%d leaves) is not a prefix of the checkpoint's tree: %v", l.AppCode, l.AtEnd.Size, err)
			}
		}
		if l.AtStart.Size > 0 {
			if err := tlog.CheckTree(hashes(l.StartToEnd), l.AtEnd.Size, end, l.AtStart.Size, start); err != nil {
				fail("%s: the head at the period's start (%d leaves) is not a prefix of the head at its end: %v", l.AppCode, l.AtStart.Size, err)
			}
		}
		if prev, ok := ends[l.AppCode]; ok && prev != l.AtStart {
			fail("%s: the previous statement ends at %d leaves (root %s), this one starts at %d (root %s): the log was rewritten in between", l.AppCode, prev.Size, prev.Root, l.AtStart.Size, l.AtStart.Root)
		}
		// Every head seen before (the previous statement's checkpoint, the largest the log was
		// published at) must be a prefix of this checkpoint's tree.
		for _, h := range l.HeadsSeen {
			if h.Size > size {
				fail("%s: %s saw a tree of %d leaves, the checkpoint holds %d: the log was written back (a rollback)", l.AppCode, h.Source, h.Size, size)
			}
			if err := tlog.CheckTree(hashes(h.ToCheckpoint), size, root, h.Size, hash(h.Root)); err != nil {
				fail("%s: the checkpoint's tree does not grow from the head of %d leaves %s saw: %v", l.AppCode, h.Size, h.Source, err)
			}
		}
		grew := ""
		if prev, ok := saw[l.AppCode]; ok {
			if prev.Size > size {
				fail("%s: the previous statement saw a tree of %d leaves, this one's checkpoint holds %d: the log was written back in between (a rollback)", l.AppCode, prev.Size, size)
			}
			proven := prev.Size == size && prev.Root == base64.StdEncoding.EncodeToString(root[:])
			for _, h := range l.HeadsSeen {
				proven = proven || (h.Size == prev.Size && h.Root == prev.Root)
			}
			if !proven {
				fail("%s: this statement does not prove its checkpoint grew from the previous statement's checkpoint of %d leaves (root %s): make it with `outbox-archiver attest --previous PREVIOUS`; a statement made so whose proof fails was given another tree", l.AppCode, prev.Size, prev.Root)
			}
			grew = fmt.Sprintf("; grew from the previous statement's checkpoint of %d leaves", prev.Size)
		}
		proven := 0
		for _, d := range a.Days {
			for _, b := range d.BatchList {
				if u := b.UnresolvedFindings; u != nil {
					unresolved[l.AppCode+"/"+b.BatchID] = true
					fmt.Printf("%s: batch %s is NOT vouched for: its latest check (%s) found %d problem(s):\n", l.AppCode, b.BatchID, u.FoundAt, u.Count)
					for _, f := range u.First {
						fmt.Printf("  %s\n", describe(f))
					}
				}
				entry := fmt.Sprintf("outbox-archive-log/v1\n%s\n%s\n%s\n%s\n", s.Table, l.AppCode, b.BatchID, b.ManifestSHA256)
				leaf := tlog.RecordHash([]byte(entry))
				if err := tlog.CheckRecord(hashes(b.InclusionProof), l.AtEnd.Size, end, b.LeafIndex, leaf); err != nil {
					fail("%s: batch %s is not leaf %d of the tree at the period's end: %v", l.AppCode, b.BatchID, b.LeafIndex, err)
				}
				proven++
			}
		}
		fmt.Printf("%s: %d batches proven in the tree of %d leaves (root %s), a prefix of the checkpoint's %d leaves (%s)", l.AppCode, proven, l.AtEnd.Size, l.AtEnd.Root, size, signed)
		if _, ok := ends[l.AppCode]; ok {
			fmt.Printf("; the previous statement's end is this one's start%s", grew)
		}
		fmt.Println()
	}
	listed := map[string]bool{}
	for _, u := range s.Unresolved {
		listed[u.AppCode+"/"+u.BatchID] = true
	}
	for name := range unresolved {
		if !listed[name] {
			fail("batch %s has unresolved findings that batches_with_unresolved_findings does not list: the statement was edited", name)
		}
	}
	if len(listed) != len(unresolved) {
		fail("batches_with_unresolved_findings lists %d batches, the batches carry findings on %d: the statement was edited", len(listed), len(unresolved))
	}
	if len(unresolved) > 0 {
		fail("every proof holds, but the statement does not vouch for %d batch(es) whose latest check found them other than recorded (listed above)", len(unresolved))
	}
}
