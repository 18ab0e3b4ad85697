package groups

// This file is the coordinator's one dispatch, as Apache Kafka's
// GroupCoordinatorShard puts ClassicGroup and ConsumerGroup behind one:
// every request for one group id is looked up here and served by the
// method of the kind of group that holds the id, a classic group
// (classic*.go) or a consumer group (KIP-848, consumer*.go). A group that
// changes kind while it is looked up (a downgrade or an upgrade commits, a
// deletion) is looked up again here; a kind's method never calls back into
// an entry point.

// groupKind is the kind of group that holds an id.
type groupKind int

const (
	kindClassic groupKind = iota
	kindConsumer
)

// lookupMode says how dispatch looks an id up.
type lookupMode struct {
	// create makes an Empty classic group when no group holds the id, and
	// takes an empty consumer group over (Kafka turns an empty consumer
	// group into a classic one on a classic request that creates).
	create bool
	// consumerFirst serves a live consumer group before any classic
	// lookup, so that creating never takes it over (an OffsetCommit).
	consumerFirst bool
}

// kindHandlers are the methods serving one request, one per kind. Each is
// called with its group locked, or with nil when no group of its kind
// holds the id, and unlocks the group; errLookAgain asks dispatch to look
// the id up again (the group changed kind meanwhile).
type kindHandlers[T any] struct {
	classic  func(*classicGroup) (T, error)
	consumer func(*consumerGroup) (T, error)
}

// dispatch looks id up (lockKind) and calls the handler of the kind that
// holds it, until an answer is not errLookAgain. Called from request
// goroutines without any lock held, after serving.
func dispatch[T any](c *Coordinator, id string, mode lookupMode, h kindHandlers[T]) (T, error) {
	for {
		var res T
		kind, g, cg, err := c.lockKind(id, mode)
		if err == nil {
			switch kind {
			case kindClassic:
				res, err = h.classic(g)
			case kindConsumer:
				res, err = h.consumer(cg)
			}
		}
		if err != errLookAgain {
			return res, err
		}
	}
}

// lockKind looks id up once and locks the group holding it: a classic
// group (nil when there is none and mode does not create one) or, for the
// id of a consumer group, that group (nil when it went meanwhile).
// errLookAgain means the consumer group was downgraded to a classic one
// meanwhile.
func (c *Coordinator) lockKind(id string, mode lookupMode) (groupKind, *classicGroup, *consumerGroup, error) {
	if !mode.consumerFirst || c.consumerOf(id) == nil {
		g, err := c.lockClassic(id, mode.create)
		if err != errConsumerGroup {
			return kindClassic, g, nil, err
		}
	}
	cg, err := c.lockConsumer(id, false)
	if isClassicGroup(err) {
		return kindConsumer, nil, nil, errLookAgain
	}
	return kindConsumer, nil, cg, err
}
