// Package security holds the tests of resched next to other teams: planners, workers and
// schedctl built from the repository, run against nats-server and redis-server configured the
// way production ones are (nkey users, operator mode with .creds files, TLS with a private CA
// and client certificates, Redis ACL users and TLS), with the tenant configuration of
// docs/security.md and with job secrets sealed at rest. It has no code outside the tests.
package security
