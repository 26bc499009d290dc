package envoyrls

import (
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// metadata reads a descriptor's metadata, a mapping of anything, as the
// google.protobuf.Struct that answers carry back (see
// WithDynamicMetadata). An empty one is nil.
func (p *parser) metadata(n *yaml.Node) *structpb.Struct {
	n = p.deref(n)
	if p.isNull(n) {
		return nil
	}
	st := p.structOf(n)
	if len(st.Fields) == 0 {
		return nil
	}
	return st
}

func (p *parser) structOf(n *yaml.Node) *structpb.Struct {
	st := &structpb.Struct{Fields: make(map[string]*structpb.Value)}
	for _, kv := range p.mapping(n, "metadata", nil) {
		st.Fields[p.utf8(n, kv.key)] = p.structValue(kv.value)
	}
	return st
}

// structValue converts a YAML node of metadata as upstream's YAML library
// and structpb.NewValue convert it: mappings to structs, lists to lists,
// booleans and numbers (yaml.v2's) to themselves, null to null, and any
// other scalar to its text.
func (p *parser) structValue(n *yaml.Node) *structpb.Value {
	n = p.deref(n)
	switch n.Kind {
	case yaml.MappingNode:
		return structpb.NewStructValue(p.structOf(n))
	case yaml.SequenceNode:
		l := &structpb.ListValue{Values: make([]*structpb.Value, 0, len(n.Content))}
		for _, item := range n.Content {
			l.Values = append(l.Values, p.structValue(item))
		}
		return structpb.NewListValue(l)
	}
	if plain(n) {
		if p.isNull(n) {
			return structpb.NewNullValue()
		}
		if b, ok := yamlBool(n.Value); ok {
			return structpb.NewBoolValue(b)
		}
		if f, ok := yamlNumber(n); ok {
			return structpb.NewNumberValue(f)
		}
	}
	return structpb.NewStringValue(p.utf8(n, n.Value))
}

// yamlNumber reads a plain scalar that YAML resolves to a number.
func yamlNumber(n *yaml.Node) (float64, bool) {
	switch n.ShortTag() {
	case "!!int":
		if v, ok := yamlInt(n.Value); ok {
			return float64(v), true
		}
	case "!!float":
		switch strings.ToLower(strings.TrimPrefix(n.Value, "+")) {
		case ".inf":
			return math.Inf(1), true
		case "-.inf":
			return math.Inf(-1), true
		case ".nan":
			return math.NaN(), true
		}
		if f, err := strconv.ParseFloat(strings.ReplaceAll(n.Value, "_", ""), 64); err == nil {
			return f, true
		}
	}
	return 0, false
}

// utf8 returns s, failing on text that is not UTF-8, which a
// protocol buffer string cannot hold.
func (p *parser) utf8(n *yaml.Node, s string) string {
	if !utf8.ValidString(s) {
		p.fail(n, "error parsing metadata: invalid UTF-8 in %s", describe(n))
	}
	return s
}

// dynamicMetadata is the dynamic metadata of an answer, as upstream's
// (with RESPONSE_DYNAMIC_METADATA): the request's domain, descriptors and
// hits_addend, and under "metadata" the metadata of the rules of the
// descriptors that were not over their limit, merged in the request's
// order (the first value of a field wins; structs are merged field by
// field). statuses are the answer's; ds the request's descriptors as
// decided, nil when its domain is unknown.
func dynamicMetadata(req *rlsv3.RateLimitRequest, statuses []*rlsv3.RateLimitResponse_DescriptorStatus, ds []desc) *structpb.Struct {
	fields := map[string]*structpb.Value{"domain": structpb.NewStringValue(req.GetDomain())}
	descs := make([]*structpb.Value, 0, len(req.GetDescriptors()))
	for _, d := range req.GetDescriptors() {
		descs = append(descs, structpb.NewStructValue(descriptorStruct(d)))
	}
	fields["descriptors"] = structpb.NewListValue(&structpb.ListValue{Values: descs})
	if h := req.GetHitsAddend(); h != 0 {
		fields["hitsAddend"] = structpb.NewNumberValue(float64(h))
	}
	passed := &structpb.Struct{Fields: make(map[string]*structpb.Value)}
	for i := range ds {
		if r := ds[i].r; r != nil && !r.unlimited && r.metadata != nil && statuses[i].GetCode() != rlsv3.RateLimitResponse_OVER_LIMIT {
			mergeStruct(passed, r.metadata)
		}
	}
	if len(passed.Fields) > 0 {
		fields["metadata"] = structpb.NewStructValue(passed)
	}
	return &structpb.Struct{Fields: fields}
}

// descriptorStruct is a request descriptor as dynamicMetadata lists it:
// its entries as "key=value", its limit in the protocol buffer text
// format, its hits_addend.
func descriptorStruct(d *ratelimitv3.RateLimitDescriptor) *structpb.Struct {
	entries := make([]*structpb.Value, 0, len(d.GetEntries()))
	for _, e := range d.GetEntries() {
		entries = append(entries, structpb.NewStringValue(e.GetKey()+"="+e.GetValue()))
	}
	fields := map[string]*structpb.Value{"entries": structpb.NewListValue(&structpb.ListValue{Values: entries})}
	if l := d.GetLimit(); l != nil {
		fields["limit"] = structpb.NewStringValue(l.String())
	}
	if h := d.GetHitsAddend(); h != nil {
		fields["hitsAddend"] = structpb.NewNumberValue(float64(h.GetValue()))
	}
	return &structpb.Struct{Fields: fields}
}

// mergeStruct adds to dst the fields of src that it does not have, and
// merges the structs that both have; src is left as it is.
func mergeStruct(dst, src *structpb.Struct) {
	for k, v := range src.GetFields() {
		have, ok := dst.Fields[k]
		switch {
		case !ok:
			dst.Fields[k] = proto.Clone(v).(*structpb.Value)
		case have.GetStructValue() != nil && v.GetStructValue() != nil:
			mergeStruct(have.GetStructValue(), v.GetStructValue())
		}
	}
}
