// Package e2e holds end-to-end tests of kcoord: real Kafka client libraries
// (franz-go, IBM/sarama, segmentio/kafka-go) running consumer groups against
// an in-process server or the kcoord binary, kill -9 durability checks, and
// offset-commit benchmarks against franz-go's kfake as a baseline.
//
// Everything here is in _test.go files; run it with
//
//	go test ./e2e/ -count=1
//	go test ./e2e/ -run '^$' -bench OffsetCommit -benchtime 2000x
package e2e
