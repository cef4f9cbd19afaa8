package store

// OnlineReplicas is onlineReplicas, for the tests of package store_test.
var OnlineReplicas = onlineReplicas
