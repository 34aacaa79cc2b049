// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdswalk

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/resolve"
	"github.com/aether-mesh/aether-operator/internal/xds"
	"github.com/aether-mesh/aether-operator/internal/xds/xdssim"
)

// What a client of the corpus sees, in words the table, the simulator and a live data plane can
// all be read into: the application it reached (which pod, which port, in which protocol), the
// mesh's own answer, a refusal, or nothing at all. A live walk observes it (a real server says
// who it is); Predict reads it out of the simulator's outcome; Admits judges it by the table; and
// Differs compares the live one with the prediction.

// SeenKind is what a client saw, in a word.
type SeenKind string

const (
	// SawApp is a connection or request that reached an application port (Seen.Port, in
	// Seen.Protocol, on one of Seen.Pods).
	SawApp SeenKind = "reached the application"
	// SawAnswer is the mesh answering the HTTP request itself (Seen.Status, .Error, .Body).
	SawAnswer SeenKind = "answered by the mesh"
	// SawRefusal is a connection refused, or closed or reset before anything came back.
	SawRefusal SeenKind = "refused"
	// SawNothing is a connection that stayed open and nothing came back.
	SawNothing SeenKind = "held open, unanswered"
	// SawUnknown is a path the simulator does not model (Seen.Detail says what), or what a live
	// client saw that none of the above names.
	SawUnknown SeenKind = "unknown"
)

// Seen is what one client saw.
type Seen struct {
	Kind SeenKind
	// Port and Protocol are the application port reached and how: HTTP (the application read an
	// HTTP request) or TCP (the bytes as they were sent). Pods are the pods (namespace/name) the
	// connection may have reached: a live client reaches one, the simulator names every endpoint
	// that receives traffic.
	Port     int32
	Protocol xdssim.Protocol
	Pods     []string
	// Upgraded says a WebSocket upgrade reached the application and was accepted.
	Upgraded bool
	// Waited is how long a server-first client waited for the first bytes (the shape
	// ShapeServerFirst only; 0 otherwise).
	Waited time.Duration
	// Status, Error (the x-aether-error header) and Body are the mesh's answer; Body is "" when
	// unknown (the simulator does not model the bodies of Envoy's own answers: LocalAnswer).
	Status      int
	Error       string
	Body        string
	LocalAnswer bool
	// Detail says how: the refusal's error, the simulator's walk, what a live client read.
	Detail string
}

func (s Seen) String() string {
	var b strings.Builder
	b.WriteString(string(s.Kind))
	switch s.Kind {
	case SawApp:
		fmt.Fprintf(&b, ": port %d as %s on %s", s.Port, s.Protocol, strings.Join(s.Pods, " or "))
		if s.Upgraded {
			b.WriteString(", upgraded to WebSocket")
		}
	case SawAnswer:
		fmt.Fprintf(&b, ": %d", s.Status)
		if s.Error != "" {
			fmt.Fprintf(&b, " %s: %s", resolve.ErrorHeader, s.Error)
		}
		if s.LocalAnswer {
			b.WriteString(" (Envoy's own)")
		} else {
			fmt.Fprintf(&b, " %q", s.Body)
		}
	}
	if s.Waited > 0 {
		fmt.Fprintf(&b, ", after %s", s.Waited.Round(time.Millisecond))
	}
	if s.Detail != "" {
		fmt.Fprintf(&b, " [%s]", s.Detail)
	}
	return b.String()
}

// heldByFilters says a wait of waited is the listener filters' timeout (timeout) holding the
// connection, not the mesh's latency: at least nine tenths of it (Envoy's timer fires at the
// timeout, never before; a connection the filters skip is answered in milliseconds).
func heldByFilters(waited, timeout time.Duration) bool {
	return timeout > 0 && waited >= timeout*9/10
}

// Admits says whether s is what e allows for the row whose promise is row (written for the
// service's mesh name); filtersTimeout is the capture listener's listener_filters_timeout, which
// tells a server-first client held by the inspectors from one answered at once.
func (e Expectation) Admits(s Seen, row resolve.Result, filtersTimeout time.Duration) error {
	answered4xx := s.Kind == SawAnswer && s.Status >= 400 && s.Status < 500
	switch e.Class {
	case AsRow:
		return e.asRow(s, row)
	case AsBytes:
		return s.reached(row.Port, xdssim.TCP)
	case Promptly:
		if err := s.reached(row.Port, xdssim.TCP); err != nil {
			return err
		}
		if heldByFilters(s.Waited, filtersTimeout) && !e.MayWait {
			return fmt.Errorf("want it not held by the listener filters (their timeout is %s)", filtersTimeout)
		}
		return nil
	case Refused:
		return s.refused()
	case RefusedOrNotDeclared:
		if s.answered(http.StatusMisdirectedRequest, "port-not-declared") == nil {
			return nil
		}
		return s.refused()
	case NotHTTP:
		return s.answered(http.StatusMisdirectedRequest, "port-not-http")
	case AsRowOrAnswered:
		if answered4xx {
			return nil
		}
		return e.asRow(s, row)
	case RefusedOrAnswered:
		if answered4xx {
			return nil
		}
		return s.refused()
	case Held:
		if s.Kind != SawNothing {
			return errors.New("want it held open, unanswered")
		}
		return nil
	}
	return fmt.Errorf("the table has no entry for this shape on a %s row", e.Kind)
}

// asRow says whether s is what row promises: its port in its protocol (a WebSocket upgraded when
// the port is HTTP), its answer (status, x-aether-error and body), or its refusal.
func (e Expectation) asRow(s Seen, row resolve.Result) error {
	switch row.Outcome {
	case resolve.Reaches:
		protocol := xdssim.TCP
		if row.Protocol.IsHTTP() {
			protocol = xdssim.HTTP
		}
		if err := s.reached(row.Port, protocol); err != nil {
			return err
		}
		if e.Shape == ShapeWebSocket && protocol == xdssim.HTTP && !s.Upgraded {
			return errors.New("want the WebSocket upgrade carried to the application")
		}
		return nil
	case resolve.Misdirected, resolve.BadRequest, resolve.NotMesh:
		if err := s.answered(resolve.HTTPStatus(row.Outcome), string(row.Error)); err != nil {
			return err
		}
		if s.Body != row.Body {
			return fmt.Errorf("want the body %q", row.Body)
		}
		return nil
	case resolve.Refused:
		return s.refused()
	}
	return fmt.Errorf("resolve's outcome %s is no single outcome", row.Outcome)
}

func (s Seen) reached(port int32, protocol xdssim.Protocol) error {
	if s.Kind != SawApp || s.Port != port || s.Protocol != protocol {
		return fmt.Errorf("want port %d as %s", port, protocol)
	}
	return nil
}

func (s Seen) answered(status int, code string) error {
	if s.Kind != SawAnswer || s.Status != status || s.Error != code {
		return fmt.Errorf("want %d %s: %s", status, resolve.ErrorHeader, code)
	}
	return nil
}

func (s Seen) refused() error {
	if s.Kind != SawRefusal {
		return errors.New("want it refused")
	}
	return nil
}

// Differs says how live, what a client saw, differs from predicted, what the simulator
// predicts; "" when they agree. A pod agrees when live's is among predicted's; a server-first
// wait agrees when both or neither are the listener filters' timeout (filtersTimeout).
func (live Seen) Differs(predicted Seen, filtersTimeout time.Duration) string {
	var d []string
	if live.Kind != predicted.Kind {
		return fmt.Sprintf("%s, not %s", live.Kind, predicted.Kind)
	}
	switch live.Kind {
	case SawApp:
		if live.Port != predicted.Port || live.Protocol != predicted.Protocol {
			d = append(d, fmt.Sprintf("port %d as %s, not %d as %s", live.Port, live.Protocol, predicted.Port, predicted.Protocol))
		}
		for _, p := range live.Pods {
			if !slices.Contains(predicted.Pods, p) {
				d = append(d, fmt.Sprintf("pod %s, none of %v", p, predicted.Pods))
			}
		}
		if live.Upgraded != predicted.Upgraded {
			d = append(d, fmt.Sprintf("upgraded %t, not %t", live.Upgraded, predicted.Upgraded))
		}
		if heldByFilters(live.Waited, filtersTimeout) != heldByFilters(predicted.Waited, filtersTimeout) {
			d = append(d, fmt.Sprintf("waited %s, not %s", live.Waited.Round(time.Millisecond), predicted.Waited))
		}
	case SawAnswer:
		if live.Status != predicted.Status || live.Error != predicted.Error {
			d = append(d, fmt.Sprintf("%d %q, not %d %q", live.Status, live.Error, predicted.Status, predicted.Error))
		}
		if !predicted.LocalAnswer && live.Body != predicted.Body {
			d = append(d, fmt.Sprintf("body %q, not %q", live.Body, predicted.Body))
		}
	case SawUnknown:
		d = append(d, "neither is known")
	}
	return strings.Join(d, "; ")
}

// Hop finds, for an endpoint's address, the simulator of the node it runs on and the pod there;
// false when no node the walk reads holds it.
type Hop func(address string) (*xdssim.Sim, model.LocalPod, bool)

// Predict is what the simulator says the client of conn (a connection of shape sh) sees, given
// out, the simulator's outcome of conn on the client's node, and hop, which follows each hop to
// the node of the endpoint it reaches (an endpoint on no node hop knows is SawUnknown):
//
//   - forwarded: each receiving endpoint's inbound listener is entered with the SNI and ALPN the
//     caller's cluster sends, carrying the request as the caller's router sends it (HTTP/2 when
//     the cluster speaks it, the upgrade it asks for) or the client's bytes; the application
//     port is the inbound's one target, its protocol the inbound chain's;
//   - passed through: the original destination is a mesh VIP (the corpus dials nothing else), a
//     selectorless Service whose proxy rejects what it does not expose: refused, which the HTTP
//     connection manager reports as its own 503 to an HTTP client;
//   - answered, closed, stalled: the answer, refused, held.
func Predict(out xdssim.Outcome, conn xdssim.Conn, sh Shape, hop Hop) Seen {
	s := Seen{Detail: out.String()}
	if sh == ShapeServerFirst {
		s.Waited = out.FiltersWaited
	}
	switch out.Verdict {
	case xdssim.Answered:
		s.Kind, s.Status, s.Error, s.LocalAnswer = SawAnswer, out.Response.Status, out.Response.Header(resolve.ErrorHeader), out.Response.Local
		if !s.LocalAnswer {
			s.Body = out.Response.Body
		}
	case xdssim.Closed:
		s.Kind = SawRefusal
	case xdssim.Stalled:
		s.Kind, s.Waited = SawNothing, 0
	case xdssim.Passthrough:
		s.Kind = SawRefusal
		if out.Protocol == xdssim.HTTP {
			s.Kind, s.Status, s.LocalAnswer = SawAnswer, http.StatusServiceUnavailable, true
		}
	case xdssim.Forwarded:
		return predictArrival(s, out, conn, hop)
	default:
		s.Kind = SawUnknown
	}
	return s
}

// predictArrival follows a forwarded outcome to the application port behind each receiving
// endpoint.
func predictArrival(s Seen, out xdssim.Outcome, conn xdssim.Conn, hop Hop) Seen {
	s.Kind = SawApp
	arrived := false
	for _, t := range out.Targets {
		if t.Weight == 0 || t.Err != nil {
			continue
		}
		if t.TLS == nil {
			s.Kind, s.Detail = SawUnknown, fmt.Sprintf("cluster %s is not a mesh hop: %s", t.Cluster, s.Detail)
			return s
		}
		req := conn.HTTP
		if out.Protocol == xdssim.HTTP && req != nil {
			hopReq := *req
			hopReq.HTTP2, hopReq.HTTP10, hopReq.Upgrade = slices.Equal(t.UpstreamHTTP, []string{"h2"}), false, t.Upgrade
			req = &hopReq
		}
		for _, ep := range t.Receiving() {
			sim, pod, ok := hop(ep.Address)
			if !ok {
				s.Kind, s.Detail = SawUnknown, fmt.Sprintf("endpoint %s runs on no node the walk reads: %s", ep.Address, s.Detail)
				return s
			}
			key := xds.PodKey(pod.Namespace, pod.Name)
			in := sim.Arrive(xds.InboundListener(key), t.TLS.SNI, t.TLS.ALPN, req)
			if in.Verdict != xdssim.Forwarded || len(in.Targets) != 1 || len(in.Targets[0].Endpoints) != 1 {
				// The destination turns the hop away: the caller's proxy sees its upstream fail.
				s.Detail = fmt.Sprintf("%s; then at %s: %s", s.Detail, key, in)
				s.Kind, s.Pods = SawRefusal, nil
				if out.Protocol == xdssim.HTTP {
					s.Kind, s.Status, s.LocalAnswer = SawAnswer, http.StatusServiceUnavailable, true
				}
				return s
			}
			port, protocol := int32(in.Targets[0].Endpoints[0].Port), in.Protocol
			if arrived && (port != s.Port || protocol != s.Protocol) {
				s.Kind, s.Detail = SawUnknown, fmt.Sprintf("the endpoints deliver to different ports (%d as %s, %d as %s): %s",
					s.Port, s.Protocol, port, protocol, s.Detail)
				return s
			}
			arrived, s.Port, s.Protocol = true, port, protocol
			s.Upgraded = s.Upgraded || (req != nil && req.Upgrade != "" && in.Targets[0].Upgrade == req.Upgrade)
			s.Pods = append(s.Pods, key)
		}
	}
	if !arrived {
		s.Kind = SawUnknown
	}
	slices.Sort(s.Pods)
	s.Pods = slices.Compact(s.Pods)
	return s
}
