package main

import (
	"fmt"
	"strconv"
	"time"
)

// msDuration is a duration flag that also takes a bare count of
// milliseconds, as kafka-consumer-groups.sh's and kafka-topics.sh's
// --timeout do ("--timeout 5000"), besides Go's form ("--timeout 5s").
type msDuration struct{ d *time.Duration }

func (m msDuration) String() string {
	if m.d == nil {
		return ""
	}
	return m.d.String()
}

func (m msDuration) Set(s string) error {
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		*m.d = time.Duration(ms) * time.Millisecond
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("want milliseconds (5000) or a duration (5s)")
	}
	*m.d = d
	return nil
}

func (m msDuration) Type() string { return "ms|duration" }
