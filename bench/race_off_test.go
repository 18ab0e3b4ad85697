//go:build !race

package bench

// raceOn: see race_on_test.go.
const raceOn = false
