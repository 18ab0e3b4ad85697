package transport

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func testMux() *Mux {
	m := NewMux()
	m.Handle(12, 0, 4, echoHeartbeat)                                                                        // Heartbeat
	m.Handle(3, 4, 13, func(_ context.Context, _ *RequestContext, req kmsg.Request) (kmsg.Response, error) { // Metadata
		return req.ResponseKind(), nil
	})
	return m
}

func TestApiVersions(t *testing.T) {
	mux := testMux()
	srv, _ := startServer(t, mux, nil)
	want := []kmsg.ApiVersionsResponseApiKey{
		{ApiKey: 3, MinVersion: 4, MaxVersion: 13},
		{ApiKey: 12, MinVersion: 0, MaxVersion: 4},
		{ApiKey: 18, MinVersion: 0, MaxVersion: 3},
	}
	if got := mux.Versions(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Versions() = %+v, want %+v", got, want)
	}
	cl := dial(t, srv)
	cl.SetClientID("apiversions-test")
	for v := int16(0); v <= 3; v++ {
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(v)
		req.ClientSoftwareName = "kcoord-test"
		req.ClientSoftwareVersion = "1.0.0"
		resp, err := cl.Do(testCtx(t), req)
		if err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		av := resp.(*kmsg.ApiVersionsResponse)
		if av.ErrorCode != 0 {
			t.Errorf("v%d: error code %d", v, av.ErrorCode)
		}
		if !reflect.DeepEqual(av.ApiKeys, want) {
			t.Errorf("v%d: ApiKeys = %+v, want %+v", v, av.ApiKeys, want)
		}
		if v == 3 && (len(av.SupportedFeatures) != 0 || len(av.FinalizedFeatures) != 0 || av.ZkMigrationReady) {
			t.Errorf("v3: unexpected features: %+v", av)
		}
	}
}

// TestApiVersionsWire checks the exact bytes of a v3 answer: a v0 response
// header (no tagged fields after the correlation id) and a body with an
// empty tag section, FinalizedFeaturesEpoch -1 being left out.
func TestApiVersionsWire(t *testing.T) {
	mux := testMux()
	srv, _ := startServer(t, mux, nil)
	nc, err := net.Dial("tcp", srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3)
	req.ClientSoftwareName, req.ClientSoftwareVersion = "x", "1"
	if _, err := nc.Write(rawRequest(req, 77)); err != nil {
		t.Fatal(err)
	}
	_ = nc.SetReadDeadline(time.Now().Add(2 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(nc, size[:]); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(nc, got); err != nil {
		t.Fatal(err)
	}
	want := binary.BigEndian.AppendUint32(nil, 77)
	want = append(want, 0, 0) // error code
	want = append(want, byte(len(mux.Versions())+1))
	for _, k := range mux.Versions() {
		want = binary.BigEndian.AppendUint16(want, uint16(k.ApiKey))
		want = binary.BigEndian.AppendUint16(want, uint16(k.MinVersion))
		want = binary.BigEndian.AppendUint16(want, uint16(k.MaxVersion))
		want = append(want, 0) // entry tags
	}
	want = append(want, 0, 0, 0, 0) // throttle
	want = append(want, 0)          // no tagged fields
	if !bytes.Equal(got, want) {
		t.Fatalf("v3 response\n got % x\nwant % x", got, want)
	}
}

func TestApiVersionsUnsupportedVersion(t *testing.T) {
	srv, _ := startServer(t, testMux(), nil)
	cl := dial(t, srv)
	for _, v := range []int16{4, 5, 1000} {
		req := kmsg.NewPtrApiVersionsRequest()
		req.SetVersion(min(v, req.MaxVersion()))
		var resp kmsg.Response
		var err error
		if v > req.MaxVersion() {
			// kmsg cannot encode it: patch the version of a v0 request.
			req.SetVersion(0)
			raw := rawRequest(req, 0)
			binary.BigEndian.PutUint16(raw[6:], uint16(v))
			cl2 := dial(t, srv)
			if err := cl2.WriteRaw(raw); err != nil {
				t.Fatal(err)
			}
			cl2.pending = append(cl2.pending, 0)
			req.SetVersion(v)
			resp, err = cl2.Recv(testCtx(t), req)
		} else {
			resp, err = cl.Do(testCtx(t), req)
		}
		if err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		av := resp.(*kmsg.ApiVersionsResponse)
		want := []kmsg.ApiVersionsResponseApiKey{{ApiKey: 18, MinVersion: 0, MaxVersion: 3}}
		if av.GetVersion() != 0 || av.ErrorCode != kerr.UnsupportedVersion.Code || !reflect.DeepEqual(av.ApiKeys, want) {
			t.Errorf("v%d: got version %d error %d keys %+v", v, av.GetVersion(), av.ErrorCode, av.ApiKeys)
		}
	}
	// The connection stays usable: the client retries lower.
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(2)
	resp, err := cl.Do(testCtx(t), req)
	if err != nil || resp.(*kmsg.ApiVersionsResponse).ErrorCode != 0 {
		t.Fatalf("retry at v2: %v %+v", err, resp)
	}
}

func TestApiVersionsInvalidSoftwareName(t *testing.T) {
	srv, _ := startServer(t, testMux(), nil)
	cl := dial(t, srv)
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3)
	req.ClientSoftwareName = "-bad name"
	req.ClientSoftwareVersion = "1.0"
	resp, err := cl.Do(testCtx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	if av := resp.(*kmsg.ApiVersionsResponse); av.ErrorCode != kerr.InvalidRequest.Code || len(av.ApiKeys) != 0 {
		t.Fatalf("got error %d keys %+v, want INVALID_REQUEST and no keys", av.ErrorCode, av.ApiKeys)
	}
}
