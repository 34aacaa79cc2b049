// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/conditions"
	"github.com/aether-mesh/aether-operator/internal/portspec"
)

// ReportingController is the reportingController of the agent's Events.
const ReportingController = "aether-agent"

// ActionRegister is the action of the agent's Events: what it was doing.
const ActionRegister = "Register"

// refusal is why the agent does not register a pod: the Event's (and the endpoint condition's)
// reason, what the Event says, and the refused-pods counter's label.
type refusal struct {
	reason string
	text   string
	kind   string
	// lead opens the Registered=False message of an endpoint registered before the refusal.
	lead string
}

// invalidAnnotations is the refusal of a pod whose annotations do not parse.
func invalidAnnotations(invalid portspec.ErrorList) refusal {
	// Rendered once: its length is the parser's to bound, not ours.
	return refusal{reason: ReasonInvalidAnnotation, text: invalid.Error(), kind: string(invalid[0].Kind),
		lead: "the pod's annotations no longer parse"}
}

// defaultServiceAccount is the refusal of a managed pod running as the `default` ServiceAccount,
// in registration.DefaultServiceAccountError's words: the webhook's denial, when it was down.
func defaultServiceAccount(err error) refusal {
	return refusal{reason: ReasonDefaultServiceAccount, text: err.Error(), kind: ReasonDefaultServiceAccount,
		lead: "the pod runs as the default ServiceAccount"}
}

// refuse handles a pod the agent does not register: no new registration, the last valid one
// (if any) stays in service with Registered=False, and the pod gets one Warning Event.
//
// The refusal is recorded (the refused map, the refusedPods counter) only after every write
// succeeded, so a failed write is retried by the next reconcile instead of being forgotten.
func (r *PodReconciler) refuse(ctx context.Context, pod *corev1.Pod, ep *meshv1alpha1.MeshEndpoint, why refusal) error {
	text := why.text
	if ep != nil {
		// Written on every refusal (setStatus writes only a difference, and cuts the message to
		// the API's limit), so a condition someone else changed is restored too.
		if err := r.setStatus(ctx, ep, metav1.Condition{Type: meshv1alpha1.EndpointConditionRegistered, Status: metav1.ConditionFalse,
			Reason:  why.reason,
			Message: why.lead + "; the last valid registration stays in service: " + text}); err != nil {
			return err
		}
	}

	note := conditions.Truncate(text, conditions.MaxEventNote)
	event := refusalEvent(pod, why.reason, note, refusedSince(ep), r.reportingInstance())
	key := client.ObjectKeyFromObject(pod)
	if said, seen := r.refused.Load(key); seen && said == event.Name {
		return nil // this process already said it
	}
	err := createEvent(ctx, r.Client, event)
	created := err == nil
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	// An Event of that name already exists when an earlier run of the agent (or an earlier
	// reconcile whose answer was lost) said the same thing about the same pod: not said twice.
	if created {
		refusedPods.WithLabelValues(why.kind).Inc()
	}
	r.refused.Store(key, event.Name)
	log.FromContext(ctx).Info("Refusing pod", "reason", why.reason, "error", note,
		"event", event.Name, "eventAlreadyExisted", !created)
	return nil
}

// refusedSince is when ep's registration went invalid (Registered flipped to False: the
// time, to the second, and the endpoint's generation then), or "" for a pod never registered.
// It tells a refusal repeated after a fix from the same one seen again.
func refusedSince(ep *meshv1alpha1.MeshEndpoint) string {
	if ep == nil {
		return ""
	}
	if c := conditions.Find(ep.Status.Conditions, meshv1alpha1.EndpointConditionRegistered); c != nil && c.Status == metav1.ConditionFalse {
		return c.LastTransitionTime.UTC().Format(time.RFC3339) + "/" + strconv.FormatInt(c.ObservedGeneration, 10)
	}
	return ""
}

// refusalEvent is the Warning Event that says why pod is refused. Its name is derived from the
// pod's UID, the note and since (refusedSince), so the agent can say each refusal once and know
// it did, across restarts, with no more than the right to create Events: a second create of
// the same refusal fails with AlreadyExists.
//
// Limits of that memory: Events expire (the API server's --event-ttl, one hour by default), so
// a refusal still standing is said again once, on the next restart; and a pod whose errors go
// from A to B and back to A while it stays refused is not told A again while A's first Event
// lives.
func refusalEvent(pod *corev1.Pod, reason, note, since, reportingInstance string) *eventsv1.Event {
	return &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Namespace: pod.Namespace, Name: refusalEventName(pod, reason, note, since)},
		EventTime:           metav1.NewMicroTime(time.Now()),
		ReportingController: ReportingController,
		ReportingInstance:   reportingInstance,
		Action:              ActionRegister,
		Reason:              reason,
		Type:                corev1.EventTypeWarning,
		Regarding:           podReference(pod),
		Note:                note,
	}
}

// kindPod is the kind of a Pod, as references spell it.
const kindPod = "Pod"

// podReference is what an Event about pod says it regards.
func podReference(pod *corev1.Pod) corev1.ObjectReference {
	return corev1.ObjectReference{APIVersion: "v1", Kind: kindPod, Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}
}

// refusalEventName is "<pod>.<digest of the pod's UID, the reason, since and the note>", cut to
// fit an object name (253 bytes; a pod name may use all of them).
func refusalEventName(pod *corev1.Pod, reason, note, since string) string {
	return podEventName(pod, reason, since, note)
}

// podEventName is "<pod>.<digest of the pod's UID and what the Event says>", cut to fit an
// object name (253 bytes; a pod name may use all of them): one name per pod and message, so the
// agent tells each thing once, across restarts, with no more than the right to create Events.
func podEventName(pod *corev1.Pod, says ...string) string {
	sum := sha256.Sum256([]byte(string(pod.UID) + "\x00" + strings.Join(says, "\x00")))
	suffix := "." + hex.EncodeToString(sum[:8])
	name := pod.Name
	if limit := 253 - len(suffix); len(name) > limit {
		// A name's dot-separated parts end in a letter or digit.
		name = strings.TrimRight(name[:limit], "-.")
	}
	return name + suffix
}

// reportingInstance is the reportingInstance of this agent's Events: it names the node (the
// API server allows 128 bytes).
func (r *PodReconciler) reportingInstance() string { return reportingInstance(r.NodeName) }

// reportingInstance is the reportingInstance of the Events of node's agent.
func reportingInstance(node string) string {
	instance := ReportingController + "-" + node
	return instance[:min(len(instance), 128)]
}

// createEvent writes event through c without read-your-writes tracking. The agent does not
// cache Events (it may only create them): tracking the write (ClientOptions) would start an
// informer for Events, which the agent's RBAC does not let it list, and wait on it forever.
func createEvent(ctx context.Context, c client.Client, event *eventsv1.Event) error {
	return c.Create(ctx, event, client.DisableReadYourWritesConsistency)
}
