package cluster

import (
	"slices"
	"strconv"
	"strings"
)

// shardList writes shard ids for a log line, sorted, with runs of
// consecutive ids as ranges (the metadata group, -1, on its own):
// "-1,0-12,40".
func shardList(ids []int32) string {
	ids = slices.Clone(ids)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	var b strings.Builder
	for i := 0; i < len(ids); {
		j := i
		for ids[i] != MetaShard && j+1 < len(ids) && ids[j+1] == ids[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(int(ids[i])))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(int(ids[j])))
		}
		i = j + 1
	}
	return b.String()
}
