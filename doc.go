// Package anyhook holds the domain of the AnyHook webhook gateway: events as
// they arrived, deliveries of those events to destinations, the attempts made
// for each delivery, and the statuses a delivery moves through.
//
// It has no SQL and no HTTP in it. The gateway's parts (ingest, delivery,
// store backends, admin API) all speak these types; cmd/anyhook wires them.
package anyhook
