// Package deploy holds no code: its tests validate the deployment files without Docker or a
// cluster. compose_test.go loads ../docker-compose.yml with the compose-spec loader;
// manifests_test.go builds the kustomizations under this directory and decodes every object
// with the Kubernetes API types. The module is separate so that those heavy dependencies stay
// out of the services.
package deploy
