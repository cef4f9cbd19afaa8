package store

import "context"

// OnlineReplicas is onlineReplicas, for the tests of package store_test.
var OnlineReplicas = onlineReplicas

// NameKeys are the keys of the partition of collection c that hold its name: the set every
// release writes and the index in order that this one adds, for tests that write as an
// earlier release did.
func (s *Store) NameKeys(c string) (set, index string) {
	p := s.k.partitionOf(c)
	return s.k.colls(p), s.k.cnames(p)
}

// Meta is the key of the layout's record.
func (s *Store) Meta() string { return s.k.meta() }

// Indexed says whether collection c's name is in its partition's index.
func (s *Store) Indexed(ctx context.Context, c string) bool {
	_, err := s.rdb.ZScore(ctx, s.k.cnames(s.k.partitionOf(c)), c).Result()
	return err == nil
}

// CollectionKey is the key of collection c's hash.
func (s *Store) CollectionKey(c string) string { return s.k.coll(c) }
