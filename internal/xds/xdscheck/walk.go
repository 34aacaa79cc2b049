// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xdscheck

import (
	"fmt"
	"slices"
	"strconv"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/aether-mesh/aether-operator/internal/xds"
)

// visitFunc is called for every message reachable from a resource, in a fixed order, with the
// path that leads to it ("listener \"capture_web/a\": filter_chains[cap_http].filters[...]").
// root is true for the resource itself and for each message unpacked from an Any: the messages
// whose generated ValidateAll covers everything below them down to the next Any.
type visitFunc func(at string, m proto.Message, root bool)

// walk visits every message of every resource of res, unpacking every Any, and returns a
// violation for each Any it could not unpack (a gate that cannot look inside must not pass).
func walk(res xds.Resources, visit visitFunc) []string {
	w := &walker{visit: visit}
	for _, c := range res.Clusters {
		w.resource(resourceAt("cluster", c.GetName()), c)
	}
	for _, e := range res.Endpoints {
		w.resource(resourceAt("load assignment", e.GetClusterName()), e)
	}
	for _, l := range res.Listeners {
		w.resource(resourceAt("listener", l.GetName()), l)
	}
	for _, r := range res.Routes {
		w.resource(resourceAt("route configuration", r.GetName()), r)
	}
	return w.unreadable
}

// resourceAt is how a violation names a resource: its kind and its quoted name.
func resourceAt(kind, name string) string { return kind + " " + strconv.Quote(name) }

// field extends a path within a resource by a field's name.
func field(path string, name protoreflect.Name) string {
	if path == "" {
		return string(name)
	}
	return path + "." + string(name)
}

type walker struct {
	visit      visitFunc
	unreadable []string
	// current is the resource being walked, as resourceAt names it.
	current string
}

func (w *walker) resource(at string, m proto.Message) {
	w.current = at
	w.message("", m.ProtoReflect(), true)
}

// at renders a path within the current resource for a violation.
func (w *walker) at(path string) string {
	if path == "" {
		return w.current
	}
	return w.current + ": " + path
}

// message visits m, at path in the current resource, and everything below it. An Any is
// replaced by what it holds, shown in the path as <Type>.
func (w *walker) message(path string, m protoreflect.Message, root bool) {
	if !m.IsValid() {
		return
	}
	if a, ok := m.Interface().(*anypb.Any); ok {
		inner, err := a.UnmarshalNew()
		if err != nil {
			w.unreadable = append(w.unreadable, fmt.Sprintf("%s: cannot unpack the Any of type %q, so no gate can check it: %v "+
				"(import the package of that type where the gate runs)", w.at(path), a.GetTypeUrl(), err))
			return
		}
		w.message(path+"<"+string(inner.ProtoReflect().Descriptor().Name())+">", inner.ProtoReflect(), true)
		return
	}
	w.visit(w.at(path), m.Interface(), root)
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if !m.Has(fd) || !isMessage(fd) {
			continue
		}
		name := field(path, fd.Name())
		v := m.Get(fd)
		switch {
		case fd.IsList():
			list := v.List()
			for j := range list.Len() {
				e := list.Get(j).Message()
				w.message(name+"["+label(e, j)+"]", e, false)
			}
		case fd.IsMap():
			entries := v.Map()
			keys := make([]string, 0, entries.Len())
			values := map[string]protoreflect.Message{}
			entries.Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				keys = append(keys, k.String())
				values[k.String()] = mv.Message()
				return true
			})
			slices.Sort(keys) // a map's order is random; violations are listed in a fixed order
			for _, k := range keys {
				w.message(name+"["+k+"]", values[k], false)
			}
		default:
			w.message(name, v.Message(), false)
		}
	}
}

// isMessage reports whether fd holds messages (a map counts when its values are messages).
func isMessage(fd protoreflect.FieldDescriptor) bool {
	if fd.IsMap() {
		fd = fd.MapValue()
	}
	return fd.Kind() == protoreflect.MessageKind || fd.Kind() == protoreflect.GroupKind
}

// label names a list element by its name field when it has a non-empty one (chains, filters,
// virtual hosts, routes), else by its index.
func label(m protoreflect.Message, index int) string {
	if fd := m.Descriptor().Fields().ByName("name"); fd != nil && fd.Kind() == protoreflect.StringKind && !fd.IsList() {
		if name := m.Get(fd).String(); name != "" {
			return name
		}
	}
	return strconv.Itoa(index)
}
