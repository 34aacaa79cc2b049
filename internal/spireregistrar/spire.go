// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package spireregistrar

import (
	"context"
	"fmt"
	"slices"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	bundlev1 "github.com/spiffe/spire-api-sdk/proto/spire/api/server/bundle/v1"
	entryv1 "github.com/spiffe/spire-api-sdk/proto/spire/api/server/entry/v1"
	"github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/aether-mesh/aether-operator/internal/workloadidentity"
)

const (
	// listPageSize is the entries asked for per ListEntries page (SPIRE's own page size).
	listPageSize = 500
	// batchSize bounds the entries of one Batch*Entry call, keeping a request far below gRPC's
	// 4 MiB message limit (an entry is a few hundred bytes).
	batchSize = 500
)

// Dial returns a client connection to the SPIRE server API on unix socket path. It connects
// lazily: a server that is not up yet fails the calls, not the manager's start.
func Dial(path string, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	return grpc.NewClient("unix://"+path, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
}

// spire is the registrar's side of the entry and bundle APIs.
type spire struct {
	entries entryv1.EntryClient
	bundles bundlev1.BundleClient
}

// checkTrustDomain refuses, as SPIRE refuses a request, a server of another trust domain than
// td: listing every entry names no trust domain, so SPIRE itself would refuse only the entries,
// one by one.
func (s spire) checkTrustDomain(ctx context.Context, td spiffeid.TrustDomain) error {
	b, err := s.bundles.GetBundle(ctx, &bundlev1.GetBundleRequest{OutputMask: &types.BundleMask{}})
	if err != nil {
		return fmt.Errorf("reading the server's trust domain: %w", err)
	}
	if b.GetTrustDomain() != td.Name() {
		return status.Errorf(codes.InvalidArgument, "the server's trust domain is %q, not %q", b.GetTrustDomain(), td.Name())
	}
	return nil
}

// candidates lists every entry: the registrar's are under the alias, the server (the alias's
// own) and every node's agent, including nodes gone since (whose entries must go too), so no
// filter of SPIRE's selects them all. Ownership is decided by the caller, by the mark.
func (s spire) candidates(ctx context.Context) ([]Entry, error) {
	return s.list(ctx, nil)
}

// list reads every page of the entries filter selects.
func (s spire) list(ctx context.Context, filter *entryv1.ListEntriesRequest_Filter) ([]Entry, error) {
	var out []Entry
	token := ""
	for {
		resp, err := s.entries.ListEntries(ctx, &entryv1.ListEntriesRequest{Filter: filter, PageSize: listPageSize, PageToken: token})
		if err != nil {
			return nil, fmt.Errorf("listing entries: %w", err)
		}
		for _, e := range resp.Entries {
			out = append(out, fromAPI(e))
		}
		token = resp.NextPageToken
		if token == "" || len(resp.Entries) == 0 {
			return out, nil
		}
	}
}

// written counts the entries one apply wrote, by operation, and what SPIRE refused.
type written struct {
	created, updated, deleted int
	refused                   []error
}

// apply writes plan: creates, updates, then deletes, each in batches. An entry SPIRE refuses is
// named in written.refused and the others are still written; a call that fails as a whole (SPIRE
// unreachable) stops the apply and is the error.
func (s spire) apply(ctx context.Context, p Plan) (written, error) {
	var w written
	for batch := range slices.Chunk(p.Create, batchSize) {
		n, refused, err := s.create(ctx, batch)
		if w.created, w.refused = w.created+n, append(w.refused, refused...); err != nil {
			return w, err
		}
	}
	for batch := range slices.Chunk(p.Update, batchSize) {
		n, refused, err := s.update(ctx, batch)
		if w.updated, w.refused = w.updated+n, append(w.refused, refused...); err != nil {
			return w, err
		}
	}
	for batch := range slices.Chunk(p.Delete, batchSize) {
		n, refused, err := s.delete(ctx, batch)
		if w.deleted, w.refused = w.deleted+n, append(w.refused, refused...); err != nil {
			return w, err
		}
	}
	return w, nil
}

func (s spire) create(ctx context.Context, batch []Entry) (int, []error, error) {
	req := &entryv1.BatchCreateEntryRequest{OutputMask: &types.EntryMask{}}
	for _, e := range batch {
		req.Entries = append(req.Entries, toAPI(e))
	}
	resp, err := s.entries.BatchCreateEntry(ctx, req)
	if err != nil {
		return 0, nil, fmt.Errorf("creating %d entries: %w", len(batch), err)
	}
	created, refused := 0, []error(nil)
	for i, r := range resp.Results {
		switch c := codes.Code(r.GetStatus().GetCode()); c {
		case codes.OK:
			created++
		case codes.AlreadyExists:
			// An entry with the same SPIFFE ID, parent and selectors appeared since the listing:
			// it provides the identity, and the next reconcile sees it.
		default:
			refused = append(refused, fmt.Errorf("SPIRE refused to create entry %s for %s: %s: %s", batch[i].ID, batch[i].SPIFFEID, c, r.GetStatus().GetMessage()))
		}
	}
	return created, refused, nil
}

// updateMask is every field a desired entry sets (Entry's compared fields).
var updateMask = &types.EntryMask{SpiffeId: true, ParentId: true, Selectors: true, Admin: true, Downstream: true,
	StoreSvid: true, ExpiresAt: true, DnsNames: true, FederatesWith: true}

func (s spire) update(ctx context.Context, batch []Entry) (int, []error, error) {
	req := &entryv1.BatchUpdateEntryRequest{InputMask: updateMask, OutputMask: &types.EntryMask{}}
	for _, e := range batch {
		req.Entries = append(req.Entries, toAPI(e))
	}
	resp, err := s.entries.BatchUpdateEntry(ctx, req)
	if err != nil {
		return 0, nil, fmt.Errorf("updating %d entries: %w", len(batch), err)
	}
	updated, refused := 0, []error(nil)
	for i, r := range resp.Results {
		if c := codes.Code(r.GetStatus().GetCode()); c != codes.OK {
			refused = append(refused, fmt.Errorf("SPIRE refused to update entry %s for %s: %s: %s", batch[i].ID, batch[i].SPIFFEID, c, r.GetStatus().GetMessage()))
			continue
		}
		updated++
	}
	return updated, refused, nil
}

func (s spire) delete(ctx context.Context, ids []string) (int, []error, error) {
	resp, err := s.entries.BatchDeleteEntry(ctx, &entryv1.BatchDeleteEntryRequest{Ids: ids})
	if err != nil {
		return 0, nil, fmt.Errorf("deleting %d entries: %w", len(ids), err)
	}
	deleted, refused := 0, []error(nil)
	for _, r := range resp.Results {
		switch c := codes.Code(r.GetStatus().GetCode()); c {
		case codes.OK:
			deleted++
		case codes.NotFound:
			// Already gone, which is what was wanted.
		default:
			refused = append(refused, fmt.Errorf("SPIRE refused to delete entry %s: %s: %s", r.GetId(), c, r.GetStatus().GetMessage()))
		}
	}
	return deleted, refused, nil
}

func toAPI(e Entry) *types.Entry {
	out := &types.Entry{Id: e.ID, SpiffeId: apiID(e.SPIFFEID), ParentId: apiID(e.Parent), Admin: e.Admin,
		Downstream: e.Downstream, StoreSvid: e.StoreSVID, ExpiresAt: e.ExpiresAt, DnsNames: e.DNSNames, FederatesWith: e.FederatesWith}
	for _, s := range e.Selectors {
		out.Selectors = append(out.Selectors, &types.Selector{Type: s.Type, Value: s.Value})
	}
	return out
}

// fromAPI converts an entry SPIRE returned. An ID that does not parse stays zero: it never equals
// a desired entry's, so an entry of ours that holds one is rewritten.
func fromAPI(e *types.Entry) Entry {
	out := Entry{ID: e.GetId(), SPIFFEID: fromAPIID(e.GetSpiffeId()), Parent: fromAPIID(e.GetParentId()), Admin: e.GetAdmin(),
		Downstream: e.GetDownstream(), StoreSVID: e.GetStoreSvid(), ExpiresAt: e.GetExpiresAt(),
		DNSNames: slices.Sorted(slices.Values(e.GetDnsNames())), FederatesWith: slices.Sorted(slices.Values(e.GetFederatesWith()))}
	for _, s := range e.GetSelectors() {
		out.Selectors = append(out.Selectors, workloadidentity.Selector{Type: s.GetType(), Value: s.GetValue()})
	}
	sortSelectors(out.Selectors)
	return out
}

func apiID(id spiffeid.ID) *types.SPIFFEID {
	return &types.SPIFFEID{TrustDomain: id.TrustDomain().Name(), Path: id.Path()}
}

func fromAPIID(id *types.SPIFFEID) spiffeid.ID {
	td, err := spiffeid.TrustDomainFromString(id.GetTrustDomain())
	if err != nil {
		return spiffeid.ID{}
	}
	out, err := spiffeid.FromPath(td, id.GetPath())
	if err != nil {
		return spiffeid.ID{}
	}
	return out
}
