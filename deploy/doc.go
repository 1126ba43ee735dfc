// Package deploy has no code: it is the module of the tests that check the
// files AnyHook ships with — the Dockerfile, docker-compose.yml, the
// systemd unit, the Kubernetes manifests, the release archives and the
// licence files — with the tools those files are written for (BuildKit's
// Dockerfile parser and linter, the Compose loader, kubeconform,
// systemd-analyze). It is a module of its own so that those tools stay out
// of the gateway's dependencies.
package deploy
