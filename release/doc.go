// Package release says which kcoord this binary is: its release version,
// the commit it was built from, and the feature levels it supports.
//
// A feature level (Kafka's metadata.version, KIP-584's finalized features)
// names what every node of a cluster may write. kcoord has one feature,
// kcoord.version, with a level per release that changed a persisted or
// wire format; a release supports a range of levels. The cluster
// finalizes a level once every node supports it (cluster/features.go), and
// until then every node writes only what the finalized level allows, so a
// cluster of two releases stays one cluster and an upgraded node can go
// back to the previous binary. docs/compatibility.md is the contract per
// format.
//
// # Files
//
//   - release.go: Version; Feature and its Level values (Level1 to
//     Level3), the range this binary supports (MinLevel, MaxLevel,
//     Supports) and ReleaseOf; Commit, the git revision the binary was built from; and
//     Format, one persisted or wire format as `kcoord version` lists it.
//
// Everything here is constant after start; any goroutine may call it.
package release
