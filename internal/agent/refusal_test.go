// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/conditions"
	"github.com/aether-mesh/aether-operator/internal/portspec"
	"github.com/aether-mesh/aether-operator/internal/registration"
	"github.com/aether-mesh/aether-operator/internal/testenv"
)

// maxAnnotations is the API server's limit on a pod's annotations, keys and values together.
const maxAnnotations = 256 * 1024

// refusalEvents lists, through the events.k8s.io/v1 API, the Warning InvalidAnnotation Events
// regarding pod (by UID).
func refusalEvents(ctx context.Context, pod *corev1.Pod) ([]eventsv1.Event, error) {
	var events eventsv1.EventList
	if err := env.Client.List(ctx, &events, client.InNamespace(pod.Namespace)); err != nil {
		return nil, err
	}
	var out []eventsv1.Event
	for _, e := range events.Items {
		if e.Regarding.UID == pod.UID && e.Reason == ReasonInvalidAnnotation && e.Type == corev1.EventTypeWarning {
			out = append(out, e)
		}
	}
	return out, nil
}

// oneRefusalEvent waits for pod's refusal Event and checks its note fits the API's limit and
// names annotation.
func oneRefusalEvent(t *testing.T, ctx context.Context, pod *corev1.Pod, annotation string) eventsv1.Event {
	t.Helper()
	var event eventsv1.Event
	testenv.Eventually(t, "the refusal Event on pod "+pod.Name, func() error {
		events, err := refusalEvents(ctx, pod)
		if err != nil {
			return err
		}
		if len(events) != 1 {
			return fmt.Errorf("%d refusal Events", len(events))
		}
		event = events[0]
		return nil
	})
	if len(event.Note) > conditions.MaxEventNote || !strings.Contains(event.Note, annotation) {
		t.Errorf("note of %d bytes (limit %d) should name %s: %.200q…", len(event.Note), conditions.MaxEventNote, annotation, event.Note)
	}
	return event
}

// hostilePorts is an endpoint.aether.io/ports value of at least size bytes, of distinct tokens
// that are not port numbers ("x1,x2,…"): one error each.
func hostilePorts(size int) map[string]string {
	var b strings.Builder
	for i := 1; b.Len() < size; i++ {
		if i > 1 {
			b.WriteByte(',')
		}
		b.WriteString("x" + strconv.Itoa(i))
	}
	return map[string]string{portspec.AnnotationPorts: b.String()}
}

// hostileToken is an endpoint.aether.io/ports value that is one size-byte token, not a port.
func hostileToken(size int) map[string]string {
	return map[string]string{portspec.AnnotationPorts: strings.Repeat("x", size)}
}

// hostileMetadata is metadata.endpoint.aether.io/<key> annotations of about size bytes in all
// (keys and values), each value one byte over the limit: one error each.
func hostileMetadata(size int) map[string]string {
	annotations := map[string]string{}
	value := strings.Repeat("v", portspec.MaxMetadataValue+1)
	for i, total := 0, 0; ; i++ {
		key := portspec.AnnotationMetadataPrefix + "k" + strconv.Itoa(i)
		if total += len(key) + len(value); total > size {
			return annotations
		}
		annotations[key] = value
	}
}

// hostile are pods a webhook that could not judge in time (or was down) let in: annotations
// whose parse errors run from about 1 KiB to the whole 256 KiB a pod may carry. Each name, the
// annotation its errors are about, and the error kind of its count.
var hostile = []struct {
	name        string
	annotations map[string]string
	annotation  string
	kind        portspec.Kind
}{
	{"ports-1k", hostilePorts(1 << 10), portspec.AnnotationPorts, portspec.KindNotAPort},
	{"ports-12k", hostilePorts(12 << 10), portspec.AnnotationPorts, portspec.KindTooLong}, // over the cap: not parsed
	{"token-200k", hostileToken(200 << 10), portspec.AnnotationPorts, portspec.KindTooLong},
	{"metadata-1k", hostileMetadata(1 << 10), portspec.AnnotationMetadataPrefix, portspec.KindInvalidMetadataValue},
	{"metadata-64k", hostileMetadata(64 << 10), portspec.AnnotationMetadataPrefix, portspec.KindInvalidMetadataValue},
	{"metadata-256k", hostileMetadata(maxAnnotations - 512), portspec.AnnotationMetadataPrefix, portspec.KindInvalidMetadataValue},
}

// TestHostileAnnotationsAreRefusedWithBoundedMessages: however long the parser's error text,
// a refused pod gets its Warning Event (note within 1 KiB), no MeshEndpoint, and one count;
// a registered pod edited into the same state keeps its last valid registration and gets
// Registered=False (message within 32 KiB) and its Event.
func TestHostileAnnotationsAreRefusedWithBoundedMessages(t *testing.T) {
	ns := namespace(t, testContext(t))
	for _, tc := range hostile {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testContext(t)
			_, parseErr := portspec.Parse(tc.annotations)
			if parseErr == nil {
				t.Fatal("the hostile annotations parse")
			}
			t.Logf("the parser's error text today: %d bytes", len(parseErr.Error()))
			before := refusals(t, tc.kind)

			edited := createPod(t, ctx, ns, tc.name+"-edited", testNode, newPodIP(), true, map[string]string{portspec.AnnotationPorts: "8080,9000=tcp"})
			ep := registeredEndpoint(t, ctx, ns, edited.Name, "the valid registration")
			lastGood := ep.Spec
			edited.Annotations = tc.annotations
			if err := env.Client.Update(ctx, edited); err != nil {
				t.Fatal(err)
			}
			testenv.Eventually(t, "Registered=False InvalidAnnotation", func() (err error) {
				if ep, err = getEndpoint(ctx, ns, edited.Name); err != nil {
					return err
				}
				c := conditions.Find(ep.Status.Conditions, meshv1alpha1.EndpointConditionRegistered)
				if c == nil || c.Status != metav1.ConditionFalse || c.Reason != meshv1alpha1.EndpointReasonInvalidAnnotation {
					return fmt.Errorf("Registered = %.300v", c)
				}
				if len(c.Message) > conditions.MaxConditionMessage || !strings.Contains(c.Message, tc.annotation) {
					t.Errorf("message of %d bytes (limit %d) should name %s", len(c.Message), conditions.MaxConditionMessage, tc.annotation)
				}
				return nil
			})
			if fmt.Sprint(ep.Spec) != fmt.Sprint(lastGood) {
				t.Errorf("the last valid registration changed:\n%+v\n%+v", ep.Spec, lastGood)
			}
			oneRefusalEvent(t, ctx, edited, tc.annotation)

			refused := createPod(t, ctx, ns, tc.name, testNode, newPodIP(), true, tc.annotations)
			oneRefusalEvent(t, ctx, refused, tc.annotation)
			if _, err := getEndpoint(ctx, ns, tc.name); !apierrors.IsNotFound(err) {
				t.Errorf("a refused pod got a MeshEndpoint (%v)", err)
			}
			testenv.Eventually(t, "both refusals counted", func() error {
				if got := refusals(t, tc.kind) - before; got != 2 {
					return fmt.Errorf("counted %v times", got)
				}
				return nil
			})
		})
	}
}

// TestRefusalSaidOnceAcrossRestarts: an agent restarted on a node with refused pods (one never
// registered, one whose registration went invalid) neither repeats their Events nor counts
// them again; a pod refused after the restart still gets its Event.
func TestRefusalSaidOnceAcrossRestarts(t *testing.T) {
	bad := map[string]string{portspec.AnnotationPorts: "8080,9000=tpc"}
	for _, registeredFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("registered first %v", registeredFirst), func(t *testing.T) {
			ctx := testContext(t)
			ns := namespace(t, ctx)
			node, restart := dedicatedAgent(t, ns)
			before := refusals(t, portspec.KindUnknownSuffix)
			countIs := func(what string, want float64) {
				t.Helper()
				// The count follows the Event's write: wait for it, and for no more than want.
				testenv.Eventually(t, what, func() error {
					if got := refusals(t, portspec.KindUnknownSuffix) - before; got != want {
						return fmt.Errorf("counted %v, want %v", got, want)
					}
					return nil
				})
			}

			var pod *corev1.Pod
			if registeredFirst {
				pod = createPod(t, ctx, ns, "refused", node, newPodIP(), true, map[string]string{portspec.AnnotationPorts: "8080,9000=tcp"})
				testenv.Eventually(t, "the valid registration", func() error { _, err := getEndpoint(ctx, ns, "refused"); return err })
				pod.Annotations = bad
				if err := env.Client.Update(ctx, pod); err != nil {
					t.Fatal(err)
				}
			} else {
				pod = createPod(t, ctx, ns, "refused", node, newPodIP(), true, bad)
			}
			oneRefusalEvent(t, ctx, pod, portspec.AnnotationPorts)
			countIs("the refusal counted", 1)

			controller := restart()
			// The node's only pod: one finished reconcile of the new agent is one of that pod.
			testenv.Eventually(t, "the restarted agent reconciled the refused pod", func() error {
				if n := reconciles(t, controller); n < 1 {
					return fmt.Errorf("%v reconciles", n)
				}
				return nil
			})
			// A canary refused after the restart: once its Event exists, every Event the new
			// agent emitted before it has been written too (Events are written in order).
			canary := createPod(t, ctx, ns, "canary", node, newPodIP(), true, bad)
			oneRefusalEvent(t, ctx, canary, portspec.AnnotationPorts)

			events, err := refusalEvents(ctx, pod)
			if err != nil {
				t.Fatal(err)
			}
			if len(events) != 1 {
				t.Errorf("the restart repeated the refusal: %d Events on the pod", len(events))
			}
			// The restart counts nothing again; the canary is counted once.
			countIs("refusals counted across the restart: the canary's alone", 2)
		})
	}
}

// TestDefaultServiceAccountRefused: a managed pod running as the `default` ServiceAccount (named
// or unset), admitted while the webhook was down (this suite runs none), gets no MeshEndpoint but
// a Warning Event in registration.DefaultServiceAccountError's words, the webhook's denial, and a
// count. The control, the same pod with its own ServiceAccount, is registered.
func TestDefaultServiceAccountRefused(t *testing.T) {
	ctx := testContext(t)
	ns := namespace(t, ctx)
	ports := map[string]string{portspec.AnnotationPorts: "8080"}
	before := refusals(t, portspec.Kind(ReasonDefaultServiceAccount))
	// The named one also declares a reserved port: its refusal says both at once.
	for name, tc := range map[string]struct {
		sa    string
		ports map[string]string
	}{"unset": {"", ports}, "named": {registration.DefaultServiceAccount, map[string]string{portspec.AnnotationPorts: "8080,18082"}}} {
		pod := createPodAs(t, ctx, ns, name, tc.sa, testNode, newPodIP(), true, tc.ports)
		_, want := registration.Problems(pod)
		if registration.CheckServiceAccount(pod) == nil || want == nil {
			t.Fatalf("pod %s runs as %q, yet CheckServiceAccount finds nothing wrong", name, pod.Spec.ServiceAccountName)
		}
		if name == "named" && !strings.Contains(want.Error(), "port 18082 is reserved") {
			t.Fatalf("pod %s: Problems says %q, nothing of its reserved port", name, want)
		}
		testenv.Eventually(t, "the refusal Event of "+name, func() error {
			return podEventOf(t, ns, name, ReasonDefaultServiceAccount, want.Error())
		})
	}
	testenv.Eventually(t, "the refusals counted", func() error {
		if got := refusals(t, portspec.Kind(ReasonDefaultServiceAccount)) - before; got != 2 {
			return fmt.Errorf("refusals counted: %v, want 2", got)
		}
		return nil
	})
	// The agent reconciles its node's pods in the order their changes came: once a pod created
	// after these has its MeshEndpoint, these were judged with their IPs.
	createPodAs(t, ctx, ns, "control", "web", testNode, newPodIP(), true, ports)
	testenv.Eventually(t, "the control's MeshEndpoint", func() error { _, err := getEndpoint(ctx, ns, "control"); return err })
	for _, name := range []string{"unset", "named"} {
		if _, err := getEndpoint(ctx, ns, name); !apierrors.IsNotFound(err) {
			t.Errorf("pod %s running as default got a MeshEndpoint (%v)", name, err)
		}
	}
}
