//go:build race

package bench

// raceOn: the race detector is on. The report's and the shard study's
// end-to-end runs skip then: they start clusters and processes for a
// minute and more, which under -race starve the packages `make test`
// runs beside them; `make test` runs them again without it.
const raceOn = true
