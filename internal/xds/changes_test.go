// Copyright 2026 The Aether Authors.
// SPDX-License-Identifier: Apache-2.0

package xds

import (
	"fmt"
	"net/netip"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unsafe"

	meshv1alpha1 "github.com/aether-mesh/aether-operator/api/v1alpha1"
	"github.com/aether-mesh/aether-operator/internal/model"
	"github.com/aether-mesh/aether-operator/internal/workloadidentity"
)

// Changes of one field at a time, found by reflection, for the Builder's tests: every field of a
// mesh (or of a selected service) is changed in turn, so a field added to the model later is
// changed too, without a test to update. Exported for the external tests (package xds_test).

// Change is a change of one field of a value: set it to another value, or drop a list's last
// item, or list its first item twice.
type Change struct {
	// Path names the field with its indices (Services[1].Ports[0].Number); Field without them
	// (Services[].Ports[].Number), the same for every item of a list.
	Path, Field string
	steps       []int
	op          changeOp
}

type changeOp int

const (
	setValue changeOp = iota
	dropLast
	repeatFirst
)

func (c Change) String() string {
	return c.Path + [...]string{" changed", ": its last item dropped", ": its first item listed twice"}[c.op]
}

var (
	timeType = reflect.TypeFor[time.Time]()
	addrType = reflect.TypeFor[netip.Addr]()
)

// Changes are every change of one field of *root (a pointer): each value set to another, each
// list shortened and lengthened. Times and IP addresses are values, not structures.
func Changes(root any) []Change {
	var out []Change
	var walk func(v reflect.Value, path, field string, steps []int)
	walk = func(v reflect.Value, path, field string, steps []int) {
		here := func(op changeOp) Change {
			return Change{Path: path, Field: field, steps: append([]int(nil), steps...), op: op}
		}
		switch {
		case v.Type() == timeType || v.Type() == addrType:
			out = append(out, here(setValue))
		case v.Kind() == reflect.Struct:
			for i := range v.NumField() {
				name := v.Type().Field(i).Name
				if v.Type().Field(i).Anonymous {
					name = v.Type().Field(i).Type.Name()
				}
				walk(v.Field(i), join(path, name), join(field, name), append(steps, i))
			}
		case v.Kind() == reflect.Slice:
			if v.Len() > 0 {
				out = append(out, here(dropLast), here(repeatFirst))
			}
			for i := range v.Len() {
				walk(v.Index(i), path+"["+strconv.Itoa(i)+"]", field+"[]", append(steps, i))
			}
		default:
			out = append(out, here(setValue))
		}
	}
	walk(reflect.ValueOf(root).Elem(), "", "", nil)
	return out
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// Apply makes c on *root (a pointer to a deep copy: lists are changed in place).
func (c Change) Apply(root any) {
	v := reflect.ValueOf(root).Elem()
	for _, step := range c.steps {
		switch v.Kind() {
		case reflect.Struct:
			v = settable(v.Field(step))
		case reflect.Slice:
			v = v.Index(step)
		default:
			panic(fmt.Sprintf("%s: no step %d into a %s", c.Path, step, v.Kind()))
		}
	}
	switch c.op {
	case dropLast:
		v.Set(v.Slice(0, v.Len()-1))
	case repeatFirst:
		first := reflect.New(v.Type().Elem()).Elem()
		deepCopyInto(first, v.Index(0))
		v.Set(reflect.Append(v, first))
	default:
		setAnother(v)
	}
}

// settable is v, made settable when it is an unexported field (meshService's).
func settable(v reflect.Value) reflect.Value {
	if v.CanSet() {
		return v
	}
	return reflect.NewAt(v.Type(), unsafe.Pointer(v.UnsafeAddr())).Elem()
}

// enumValues are the values of the model's enumerations: a change picks the next one, so that a
// health, a protocol or a mode stays one the mesh knows.
var enumValues = map[reflect.Type][]string{
	reflect.TypeFor[meshv1alpha1.Health]():      {"Healthy", "Unhealthy", "Pending", "Draining"},
	reflect.TypeFor[meshv1alpha1.Protocol]():    {"HTTP", "HTTP2", "TCP"},
	reflect.TypeFor[meshv1alpha1.AppProtocol](): {"", "grpc"},
	reflect.TypeFor[model.CaptureMode]():        {"surface", "scoped", "all"},
	reflect.TypeFor[model.RouteKind]():          {"HTTPRoute", "GRPCRoute", "TCPRoute", "TLSRoute"},
	reflect.TypeFor[workloadidentity.Issuer]():  {"none", "spire"},   // the zero value is spire: a change is to none
	reflect.TypeFor[model.UpstreamsMode]():      {"declared", "all"}, // the zero value is all: a change is to declared
}

// setAnother sets v to another value of its type: an IP address to the next, an enumeration to
// its next value, another string to itself and "x", a number to the next, a time a minute later,
// a bool to its opposite, a map or a list to a copy with one more entry.
func setAnother(v reflect.Value) {
	switch {
	case v.Type() == timeType:
		v.Set(reflect.ValueOf(v.Interface().(time.Time).Add(time.Minute)))
		return
	case v.Type() == addrType:
		a := v.Interface().(netip.Addr)
		if !a.IsValid() {
			a = netip.MustParseAddr("10.99.0.0")
		}
		v.Set(reflect.ValueOf(a.Next()))
		return
	}
	switch v.Kind() {
	case reflect.String:
		s := v.String()
		if values, ok := enumValues[v.Type()]; ok {
			i := 0
			for j, value := range values {
				if value == s {
					i = j + 1
				}
			}
			v.SetString(values[i%len(values)])
		} else if a, err := netip.ParseAddr(s); err == nil {
			v.SetString(a.Next().String())
		} else {
			v.SetString(s + "x")
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(v.Int() + 1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(v.Uint() + 1)
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		for it := v.MapRange(); it.Next(); {
			m.SetMapIndex(it.Key(), it.Value())
		}
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		setAnother(k)
		setAnother(e)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Struct:
		setAnother(v.Field(0)) // one field changed is another value
	case reflect.Slice:
		e := reflect.New(v.Type().Elem()).Elem()
		setAnother(e)
		grown := reflect.MakeSlice(v.Type(), v.Len(), v.Len()+1) // a copy: the list may be shared
		reflect.Copy(grown, v)
		v.Set(reflect.Append(grown, e))
	default:
		panic("xds test: no change for a " + v.Type().String() + ": teach setAnother one")
	}
}

// DeepCopy is a copy of x that shares no list or map with it.
func DeepCopy[T any](x T) T {
	var out T
	src := reflect.New(reflect.TypeFor[T]()).Elem() // addressable, so its unexported fields can be read
	src.Set(reflect.ValueOf(x))
	deepCopyInto(reflect.ValueOf(&out).Elem(), src)
	return out
}

func deepCopyInto(dst, src reflect.Value) {
	switch {
	case src.Type() == timeType || src.Type() == addrType:
		dst.Set(src)
	case src.Kind() == reflect.Struct:
		for i := range src.NumField() {
			deepCopyInto(settable(dst.Field(i)), readable(src.Field(i)))
		}
	case src.Kind() == reflect.Slice:
		if src.IsNil() {
			return
		}
		s := reflect.MakeSlice(src.Type(), src.Len(), src.Len())
		for i := range src.Len() {
			deepCopyInto(s.Index(i), src.Index(i))
		}
		dst.Set(s)
	case src.Kind() == reflect.Map:
		if src.IsNil() {
			return
		}
		m := reflect.MakeMapWithSize(src.Type(), src.Len())
		for it := src.MapRange(); it.Next(); {
			m.SetMapIndex(it.Key(), it.Value())
		}
		dst.Set(m)
	case src.Kind() == reflect.Pointer || src.Kind() == reflect.Interface:
		panic("xds test: DeepCopy does not follow a " + src.Type().String())
	default:
		dst.Set(src)
	}
}

// readable is v, readable when it is an unexported field.
func readable(v reflect.Value) reflect.Value {
	if v.CanInterface() || !v.CanAddr() {
		return v
	}
	return reflect.NewAt(v.Type(), unsafe.Pointer(v.UnsafeAddr())).Elem()
}

// FieldsOf are the distinct Fields of changes (of values, not lists).
func FieldsOf(changes []Change) []string {
	seen := map[string]bool{}
	var out []string
	for _, c := range changes {
		if !seen[c.Field] && !strings.HasSuffix(c.Field, "]") {
			seen[c.Field] = true
			out = append(out, c.Field)
		}
	}
	return out
}
