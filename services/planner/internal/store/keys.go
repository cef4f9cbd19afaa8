package store

import (
	"fmt"
	"hash/crc32"
)

// Partitions is the number of hash-tagged partitions the data is spread over. A collection
// and everything in it live in one partition, so that every script that touches several keys
// names keys of one Redis Cluster slot. Changing it orphans existing data: it is a constant.
const Partitions = 16

// keys names every Redis key the planner uses; no other file builds a key.
//
//	<prefix>:{pNN}:due            sorted set: member "collection/job", score = next fire (ms)
//	<prefix>:{pNN}:colls          set: collection names of the partition
//	<prefix>:{pNN}:coll:<c>       hash: def (collection JSON), state, maxJobCount
//	<prefix>:{pNN}:jobs:<c>       set: job names of a collection
//	<prefix>:{pNN}:def:<c>/<j>    string: the job definition blob (secrets included)
//	<prefix>:{pNN}:st:<c>/<j>     hash: small mutable fields (see jobstate.go)
//	<prefix>:{pNN}:hist:<c>/<j>   list: history entries, newest first, "<ms>|<json>"
type keys struct {
	prefix string
	tags   [Partitions]string // "<prefix>:{pNN}", built once: keys are built on every fire
}

func newKeys(prefix string) keys {
	k := keys{prefix: prefix}
	for p := range Partitions {
		k.tags[p] = fmt.Sprintf("%s:{p%02d}", prefix, p)
	}
	return k
}

// PartitionOf returns the partition that holds a collection and its jobs.
func PartitionOf(collection string) int {
	return int(crc32.ChecksumIEEE([]byte(collection)) % Partitions)
}

func (k keys) tag(p int) string           { return k.tags[p] }
func (k keys) due(p int) string           { return k.tag(p) + ":due" }
func (k keys) colls(p int) string         { return k.tag(p) + ":colls" }
func (k keys) coll(c string) string       { return k.tag(PartitionOf(c)) + ":coll:" + c }
func (k keys) jobs(c string) string       { return k.tag(PartitionOf(c)) + ":jobs:" + c }
func (k keys) def(c, j string) string     { return k.tag(PartitionOf(c)) + ":def:" + c + "/" + j }
func (k keys) state(c, j string) string   { return k.tag(PartitionOf(c)) + ":st:" + c + "/" + j }
func (k keys) history(c, j string) string { return k.tag(PartitionOf(c)) + ":hist:" + c + "/" + j }

// member is a job's member in the due set.
func member(c, j string) string { return c + "/" + j }
