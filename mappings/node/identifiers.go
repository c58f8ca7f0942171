package node

import (
	"context"

	"github.com/d1bridge/d1bridge/adapter"
)

// Identifiers is a third-party identifier service (DataCite) that mints DOIs
// and holds their metadata, behind publish, publishIdentifier,
// updateIdMetadata and generateIdentifier's DOI scheme (publish.go).
//
// Its errors are adapter Exceptions. A failure of the service, whatever it
// answered (a refusal of the node's credentials, invalid metadata, an outage),
// is a ServiceFailure that names the service and says what it answered: the
// caller of the node did nothing wrong.
type Identifiers interface {
	// Mint reserves a new identifier at the service and returns it as this
	// node writes PIDs: doi:<prefix>/<shoulder><random> (DataCite: a draft DOI
	// without metadata, so that no one else can take it).
	Mint(ctx context.Context) (string, error)
	// Owns reports whether id is in the service's namespace (its prefix and
	// shoulder): the identifiers this node registers there.
	Owns(id string) bool
	// Register creates or replaces id's metadata at the service. With findable
	// the identifier is also made public (DataCite: event publish, draft ->
	// findable); otherwise its state does not change (a minted DOI stays a
	// draft, a findable one stays findable).
	Register(ctx context.Context, id string, md IDMetadata, findable bool) error
	// Discard removes an identifier minted for an object that was not stored
	// (DataCite deletes drafts only); an unknown identifier is not an error.
	Discard(ctx context.Context, id string) error
	// AutoPublish reports whether publish makes the new identifier findable
	// at once; otherwise it stays a draft until publishIdentifier.
	AutoPublish() bool
}

// IDMetadata is what the node tells the identifier service about one of its
// identifiers.
type IDMetadata struct {
	// Meta is the system metadata of the object the identifier names; for a
	// SID, the head of its series.
	Meta *adapter.SystemMetadata
	// Title is the title of the science metadata document the object is (EML,
	// ISO 19115/19139), when it has one; empty otherwise.
	Title string
}

// SetIdentifiers sets the identifier service (nil: none). Call it before the
// node serves requests.
func (n *Node) SetIdentifiers(ids Identifiers) { n.ids = ids }
