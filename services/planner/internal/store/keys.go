package store

import (
	"fmt"
	"hash/crc32"
)

// DefaultPartitions is how many hash-tagged partitions the data is spread over unless
// configured. A collection and everything in it live in one partition, so that every script
// that touches several keys names keys of one Redis Cluster slot. The count is recorded in
// Redis at the first start (CheckLayout) and cannot change afterwards without a migration.
const DefaultPartitions = 16

// MaxPartitions bounds the setting: each partition is a lease, a goroutine and a due set.
const MaxPartitions = 1024

// keys names every Redis key the planner uses; no other file builds a key.
//
//	<prefix>:{pNN}:due            sorted set: member "collection/job", score = next fire (ms)
//	<prefix>:{pNN}:owner          string: the token of the planner holding the partition's lease
//	<prefix>:{pNN}:seq            counter: job versions, never repeated within the partition
//	<prefix>:{pNN}:colls          set: collection names of the partition
//	<prefix>:{pNN}:cnames         sorted set, every score 0: the same names in order (listing)
//	<prefix>:{pNN}:unfinished     sorted set: collections with a state change or delete under
//	                              way, by its last call (ms)
//	<prefix>:{pNN}:purges         sorted set: "<c>/<j>@<incarnation>" of jobs deleted whose
//	                              messages may still be on the due stream, by the delete (ms)
//	<prefix>:{pNN}:coll:<c>       hash: def (collection JSON), state, maxJobCount, gen; change
//	                              and changeFrom while a change is under way
//	<prefix>:{pNN}:jobs:<c>       sorted set, every score 0: job names of a collection, in order
//	<prefix>:{pNN}:gone           hash: member -> "epoch:seq" of the intake delete that removed it
//	<prefix>:{pNN}:gonet          sorted set: member, by when it was deleted (to forget "gone")
//	<prefix>:{pNN}:def:<c>/<j>    string: the job definition blob (secrets included)
//	<prefix>:{pNN}:st:<c>/<j>     hash: small mutable fields (see jobFromState)
//	<prefix>:{pNN}:hist:<c>/<j>   list: history entries, newest first, "<ms>|<json>"
//	<prefix>:{pNN}:rid:<c>/<j>    sorted set: ids of the results applied lately, by time
//	<prefix>:{ctl}:planners       sorted set: live planner ids, by heartbeat expiry
//	<prefix>:{ctl}:alive          string: the last heartbeat of any planner (ms)
//	<prefix>:{ctl}:outages        list: "<from>|<to>" (ms) intervals when no planner ran
//	<prefix>:{ctl}:meta           hash: partitions (the layout of the data)
type keys struct {
	prefix string
	tags   []string // "<prefix>:{pNN}", built once: keys are built on every fire
}

func newKeys(prefix string, partitions int) keys {
	k := keys{prefix: prefix, tags: make([]string, partitions)}
	for p := range partitions {
		k.tags[p] = fmt.Sprintf("%s:{p%02d}", prefix, p)
	}
	return k
}

// partitionOf returns the partition that holds a collection and its jobs.
func (k keys) partitionOf(collection string) int {
	return int(crc32.ChecksumIEEE([]byte(collection)) % uint32(len(k.tags)))
}

func (k keys) tag(p int) string           { return k.tags[p] }
func (k keys) due(p int) string           { return k.tag(p) + ":due" }
func (k keys) owner(p int) string         { return k.tag(p) + ":owner" }
func (k keys) seq(p int) string           { return k.tag(p) + ":seq" }
func (k keys) colls(p int) string         { return k.tag(p) + ":colls" }
func (k keys) cnames(p int) string        { return k.tag(p) + ":cnames" }
func (k keys) gone(p int) string          { return k.tag(p) + ":gone" }
func (k keys) goneTimes(p int) string     { return k.tag(p) + ":gonet" }
func (k keys) unfinished(p int) string    { return k.tag(p) + ":unfinished" }
func (k keys) purges(p int) string        { return k.tag(p) + ":purges" }
func (k keys) ctag(c string) string       { return k.tag(k.partitionOf(c)) }
func (k keys) coll(c string) string       { return k.ctag(c) + ":coll:" + c }
func (k keys) jobs(c string) string       { return k.ctag(c) + ":jobs:" + c }
func (k keys) def(c, j string) string     { return k.ctag(c) + ":def:" + c + "/" + j }
func (k keys) state(c, j string) string   { return k.ctag(c) + ":st:" + c + "/" + j }
func (k keys) history(c, j string) string { return k.ctag(c) + ":hist:" + c + "/" + j }
func (k keys) results(c, j string) string { return k.ctag(c) + ":rid:" + c + "/" + j }
func (k keys) planners() string           { return k.prefix + ":{ctl}:planners" }
func (k keys) alive() string              { return k.prefix + ":{ctl}:alive" }
func (k keys) outages() string            { return k.prefix + ":{ctl}:outages" }
func (k keys) meta() string               { return k.prefix + ":{ctl}:meta" }

// member is a job's member in the due set.
func member(c, j string) string { return c + "/" + j }
