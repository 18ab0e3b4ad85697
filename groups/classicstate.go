package groups

// State is a classic group's state, named as Kafka names them in
// DescribeGroups and ListGroups.
type State uint8

const (
	// Empty: no members; offsets may still be stored.
	Empty State = iota
	// PreparingRebalance: waiting for members to (re)join.
	PreparingRebalance
	// CompletingRebalance: joins answered, waiting for the leader's
	// assignment in SyncGroup.
	CompletingRebalance
	// Stable: assignment committed and handed out.
	Stable
	// Dead: the group is being removed.
	Dead
)

// String returns Kafka's name of the state.
func (s State) String() string {
	switch s {
	case Empty:
		return "Empty"
	case PreparingRebalance:
		return "PreparingRebalance"
	case CompletingRebalance:
		return "CompletingRebalance"
	case Stable:
		return "Stable"
	case Dead:
		return "Dead"
	}
	return "Unknown"
}

// validPrevious lists the states a group may enter each state from, as
// Kafka's GroupState does; a transition outside it is a bug.
var validPrevious = map[State][]State{
	Empty:               {PreparingRebalance},
	PreparingRebalance:  {Empty, Stable, CompletingRebalance},
	CompletingRebalance: {PreparingRebalance},
	Stable:              {CompletingRebalance},
	Dead:                {Empty, PreparingRebalance, CompletingRebalance, Stable, Dead},
}
