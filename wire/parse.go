package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Source names the member of a capabilities.list result that a list of names
// was read from.
type Source string

// The sources Parse knows, with the wire format the standard gives each.
const (
	SourceNone                 Source = ""
	SourceMethods              Source = "methods"               // Level 2 envelope (also Format B)
	SourceProvidedCapabilities Source = "provided_capabilities" // Format E
	SourceCapabilities         Source = "capabilities"          // Format B / legacy
	SourceMethodInfo           Source = "method_info"           // Format C
	SourceSemanticMappings     Source = "semantic_mappings"     // Format D
	SourceArray                Source = "array"                 // Format A: the result is an array
	SourceObjectKeys           Source = "object_keys"           // primalSpring's last resort
)

// Order is the priority in which Parse looks for a method list.
type Order int

const (
	// OrderStandard is the priority documented by the Capability Wire
	// Standard: methods, provided_capabilities, capabilities, method_info,
	// semantic_mappings, bare array.
	OrderStandard Order = iota
	// OrderBiomeOS is what biomeOS's cap_probe actually does: capabilities,
	// bare array, methods, method_info, semantic_mappings,
	// provided_capabilities.
	OrderBiomeOS
	// OrderPrimalSpring is primalSpring's extract_capability_names: bare
	// array, method_info, semantic_mappings, capabilities, methods, and
	// finally the result object's own keys.
	OrderPrimalSpring
)

var orders = map[Order][]Source{
	OrderStandard:     {SourceMethods, SourceProvidedCapabilities, SourceCapabilities, SourceMethodInfo, SourceSemanticMappings, SourceArray},
	OrderBiomeOS:      {SourceCapabilities, SourceArray, SourceMethods, SourceMethodInfo, SourceSemanticMappings, SourceProvidedCapabilities},
	OrderPrimalSpring: {SourceArray, SourceMethodInfo, SourceSemanticMappings, SourceCapabilities, SourceMethods, SourceObjectKeys},
}

// String returns the order's name.
func (o Order) String() string {
	switch o {
	case OrderStandard:
		return "standard"
	case OrderBiomeOS:
		return "biomeos"
	case OrderPrimalSpring:
		return "primalspring"
	}
	return fmt.Sprintf("Order(%d)", int(o))
}

// ParseOption changes how Parse reads a result.
type ParseOption func(*parseConfig)

type parseConfig struct {
	order Order
}

// WithOrder selects the priority in which method lists are looked for
// (default OrderStandard).
func WithOrder(o Order) ParseOption { return func(c *parseConfig) { c.order = o } }

// Capabilities is what Parse makes of a capabilities.list result, whatever
// its format.
type Capabilities struct {
	// Source is where Names and Methods were read from (SourceNone when no
	// member yielded a name).
	Source Source
	// Detected lists every source that holds at least one name, in the
	// standard's order; more than one means the host sends several
	// formats at once.
	Detected []Source

	// Primal and Version are the envelope's fields ("" when absent).
	Primal, Version string

	// Names is what a router registers from the chosen source, as biomeOS
	// would: the method names, plus the bare group types when the source is
	// provided_capabilities. Duplicates are dropped, order is kept.
	Names []string
	// Methods is Names without the group types: the callable methods. A
	// host that sends capability tokens in place of methods (Format A with
	// tokens such as "crypto") gets them here unchanged; Level reports
	// them.
	Methods []string

	// Groups is provided_capabilities with every method fully qualified;
	// short and fully-qualified spellings are both understood (see Parse).
	Groups []Group
	// Consumed is consumed_capabilities, whether given as strings or
	// objects.
	Consumed []Consumed
	// CostEstimates is cost_estimates (nil when absent).
	CostEstimates map[string]CostEstimate
	// OperationDependencies is operation_dependencies (nil when absent).
	OperationDependencies map[string][]string
	// Protocol and Transport are the protocol and transport fields.
	Protocol  string
	Transport []string
	// SignedAnnouncement and TransportSecurity are nil when absent or
	// malformed (a Deviation says which).
	SignedAnnouncement *SignedAnnouncement
	TransportSecurity  *TransportSecurity

	// Envelope records which standard fields were present and well-formed;
	// Level reads it.
	Envelope Envelope
	// Extra holds the members the standard does not define, as sent.
	Extra map[string]json.RawMessage
	// Deviations lists every departure from the standard that Parse
	// tolerated.
	Deviations []Deviation
}

// Field is the state of one field of the envelope.
type Field uint8

const (
	// Absent means the member is missing (or null).
	Absent Field = iota
	// Malformed means the member is present with the wrong JSON type.
	Malformed
	// Present means the member is present with the right JSON type.
	Present
)

// String returns the field state's name (absent, malformed, present, …).
func (f Field) String() string {
	switch f {
	case Absent:
		return "absent"
	case Malformed:
		return "malformed"
	case Present:
		return "present"
	}
	return fmt.Sprintf("Field(%d)", int(f))
}

// Envelope records the standard fields of a capabilities.list result.
type Envelope struct {
	// Object is true when the result is a JSON object (false: a bare
	// array).
	Object bool

	// The state of each standard member.
	Primal, Version, Methods                   Field
	ProvidedCapabilities, ConsumedCapabilities Field
	CostEstimates, OperationDependencies       Field
	// MethodNames holds the names in methods as sent (strings, and the
	// names of entries given as objects), duplicates included.
	MethodNames []string
	// MethodObjects counts the methods entries given as objects and
	// MethodInvalid those that are neither strings nor named objects; a
	// flat string array has both zero.
	MethodObjects, MethodInvalid int
}

// Group is one provided_capabilities entry with fully qualified methods.
type Group struct {
	Type        string
	Methods     []string
	Version     string
	Description string
}

// Consumed is one entry of consumed_capabilities.
type Consumed struct {
	// Name is the method (crypto.sign) or, for hosts that send capability
	// tokens or objects, the token or the object's type.
	Name string
	// Reason and Required come from the object form ({type, reason,
	// required}); Required is nil when not given.
	Reason   string
	Required *bool
}

// Deviation is one departure from the standard that Parse tolerated.
type Deviation struct {
	// Field is the member concerned, e.g. "methods[3]" or
	// "provided_capabilities[0].methods".
	Field string
	// Detail says what was found.
	Detail string
}

// String returns "field: detail".
func (d Deviation) String() string { return d.Field + ": " + d.Detail }

// ErrNotCapabilities is returned (wrapped) by Parse when the result is not a
// JSON object or array.
var ErrNotCapabilities = errors.New("capabilities.list result is not a JSON object or array")

// Parse reads the result member of a capabilities.list response (not the
// whole JSON-RPC response) in any of the formats the ecosystem uses:
//
//   - the Level 2/3 envelope {primal, version, methods, …};
//   - Format A, a bare array of names; Format B, an array of {method} or
//     {name} objects, or an object with capabilities[] (and methods[]);
//   - Format C, {method_info: [{name}]}; Format D, {semantic_mappings:
//     {domain: {verb: {}}}}; Format E, {provided_capabilities: [{type,
//     methods}]};
//   - methods or group methods given as {name} / {method} objects.
//
// The method list is taken from the first source, in the chosen Order, that
// yields at least one name. provided_capabilities is always read into
// Groups: a group method is qualified as type.method unless it is already
// fully qualified — it starts with "type.", or it (and not type.method) is
// among the host's advertised names, or the host's groups are written
// fully-qualified throughout — so rhizoCrypt's {type: dag, methods:
// [dag.session.create]} gives dag.session.create, never
// dag.dag.session.create.
//
// Parse fails only when result is not JSON or is neither an object nor an
// array; a result in which no method list is found parses to a Capabilities
// with Source SourceNone and no Names.
func Parse(result json.RawMessage, opts ...ParseOption) (*Capabilities, error) {
	cfg := parseConfig{order: OrderStandard}
	for _, o := range opts {
		o(&cfg)
	}
	seq, ok := orders[cfg.order]
	if !ok {
		return nil, fmt.Errorf("parse capabilities: unknown order %d", int(cfg.order))
	}
	trimmed := bytes.TrimSpace(result)
	p := &parser{c: &Capabilities{}}
	switch {
	case len(trimmed) > 0 && trimmed[0] == '[':
		var arr []any
		if err := decode(trimmed, &arr); err != nil {
			return nil, fmt.Errorf("parse capabilities: %w", err)
		}
		p.array, p.isArray = arr, true
	case len(trimmed) > 0 && trimmed[0] == '{':
		if err := json.Unmarshal(trimmed, &p.raw); err != nil {
			return nil, fmt.Errorf("parse capabilities: %w", err)
		}
		p.c.Envelope.Object = true
		p.vals = make(map[string]any, len(p.raw))
		for k, v := range p.raw {
			if !knownMembers[k] {
				if p.c.Extra == nil {
					p.c.Extra = map[string]json.RawMessage{}
				}
				p.c.Extra[k] = v
			}
		}
	default:
		var v any
		if err := json.Unmarshal(trimmed, &v); err != nil {
			return nil, fmt.Errorf("parse capabilities: invalid JSON: %w", err)
		}
		return nil, fmt.Errorf("parse capabilities: %w (got %s)", ErrNotCapabilities, kindOf(v))
	}
	p.run(seq)
	return p.c, nil
}

// decode unmarshals JSON keeping numbers as json.Number, so that integers
// such as memory_bytes stay exact.
func decode(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("invalid JSON: data after the top-level value")
	}
	return nil
}

// kindOf names the JSON type of a decoded value.
func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	}
	return "a number"
}

type parser struct {
	c       *Capabilities
	isArray bool
	array   []any
	raw     map[string]json.RawMessage // the result's members, as sent
	vals    map[string]any             // members decoded so far
	names   map[string]nameList        // name lists read so far, by member
}

// nameList is an array of names read from one member.
type nameList struct {
	names            []string
	objects, invalid int
	isArray          bool
}

// knownMembers are the result members the standard (or a format A-E)
// defines; everything else goes to Extra.
var knownMembers = map[string]bool{
	"primal": true, "version": true, "methods": true, "provided_capabilities": true,
	"consumed_capabilities": true, "cost_estimates": true, "operation_dependencies": true,
	"protocol": true, "transport": true, "signed_announcement": true, "transport_security": true,
	"capabilities": true, "method_info": true, "semantic_mappings": true,
}

func (p *parser) dev(field, format string, args ...any) {
	p.c.Deviations = append(p.c.Deviations, Deviation{Field: field, Detail: fmt.Sprintf(format, args...)})
}

// get returns a member, decoded, unless it is absent or null. Each member
// is decoded once.
func (p *parser) get(key string) (any, bool) {
	if v, ok := p.vals[key]; ok {
		return v, v != nil
	}
	raw, ok := p.raw[key]
	if !ok {
		return nil, false
	}
	var v any
	_ = decode(raw, &v) // raw is valid JSON: it came out of json.Unmarshal
	p.vals[key] = v
	return v, v != nil
}

// memberNames reads a member as an array of names, once.
func (p *parser) memberNames(key string) nameList {
	if l, ok := p.names[key]; ok {
		return l
	}
	v, _ := p.get(key)
	l := namesOf(v)
	if p.names == nil {
		p.names = map[string]nameList{}
	}
	p.names[key] = l
	return l
}

func (p *parser) run(seq []Source) {
	c := p.c
	if !p.isArray {
		p.envelopeStrings()
		p.readMethodsField()
		p.readGroups()
		p.readConsumed()
		p.readCosts()
		p.readDeps()
		p.readTransport()
		p.readSigned()
		p.compareCapabilitiesAndMethods()
	}
	extracted := map[Source][]string{}
	types := map[string]bool{}
	for _, s := range orders[OrderStandard] {
		if names := p.extract(s, types); len(names) > 0 {
			extracted[s] = names
			c.Detected = append(c.Detected, s)
		}
	}
	for _, s := range seq {
		names, ok := extracted[s]
		if !ok && s == SourceObjectKeys {
			names = p.extract(s, types)
		}
		if len(names) == 0 {
			continue
		}
		c.Source = s
		c.Names = dedupe(names)
		for _, n := range c.Names {
			if s == SourceProvidedCapabilities && types[n] {
				continue
			}
			c.Methods = append(c.Methods, n)
		}
		break
	}
	p.reportUnread(extracted, types)
}

// reportUnread records a Deviation for every other detected source that
// names methods the source read lacks: a client that follows the parse
// order cannot call them (NestGate lists 99 names in capabilities, of which
// its provided_capabilities, read first, carry 61).
func (p *parser) reportUnread(extracted map[Source][]string, types map[string]bool) {
	c := p.c
	if c.Source == SourceNone {
		return
	}
	read := make(map[string]bool, len(c.Names))
	for _, n := range c.Names {
		read[n] = true
	}
	for _, s := range c.Detected {
		if s == c.Source {
			continue
		}
		var missing []string
		for _, n := range dedupe(extracted[s]) {
			if !read[n] && !(s == SourceProvidedCapabilities && types[n]) {
				missing = append(missing, n)
			}
		}
		if len(missing) == 0 {
			continue
		}
		shown := missing
		if len(shown) > 5 {
			shown = shown[:5]
		}
		more := ""
		if len(missing) > len(shown) {
			more = ", …"
		}
		p.dev(string(s), "names %d method(s) that %s, the source read, lacks (%s%s): a client following the parse order cannot call them",
			len(missing), c.Source, strings.Join(shown, ", "), more)
	}
}

// envelopeStrings reads primal and version.
func (p *parser) envelopeStrings() {
	for _, f := range []struct {
		key   string
		dst   *string
		state *Field
	}{
		{"primal", &p.c.Primal, &p.c.Envelope.Primal},
		{"version", &p.c.Version, &p.c.Envelope.Version},
	} {
		v, ok := p.get(f.key)
		if !ok {
			continue
		}
		s, isStr := v.(string)
		if !isStr {
			*f.state = Malformed
			p.dev(f.key, "is %s, want a string", kindOf(v))
			continue
		}
		*f.dst, *f.state = s, Present
	}
}

// namesOf reads an array of names: strings, or objects carrying the name
// in "name" or "method". It counts the entries given as objects and those
// it had to skip; isArray is false when v is not an array.
func namesOf(v any) nameList {
	arr, ok := v.([]any)
	if !ok {
		return nameList{}
	}
	l := nameList{isArray: true, names: make([]string, 0, len(arr))}
	for _, e := range arr {
		if s, ok := e.(string); ok {
			l.names = append(l.names, s)
			continue
		}
		if n, isObj := nameOfObject(e); isObj {
			l.objects++
			if n != "" {
				l.names = append(l.names, n)
				continue
			}
		}
		l.invalid++
	}
	return l
}

// nameOfObject returns the "name" (else "method") string member of an
// object entry; isObj is false when e is not an object.
func nameOfObject(e any) (name string, isObj bool) {
	obj, ok := e.(map[string]any)
	if !ok {
		return "", false
	}
	for _, k := range []string{"name", "method"} {
		if s, ok := obj[k].(string); ok && s != "" {
			return s, true
		}
	}
	return "", true
}

// readMethodsField records the shape of the methods member.
func (p *parser) readMethodsField() {
	v, ok := p.get("methods")
	if !ok {
		return
	}
	l := p.memberNames("methods")
	if !l.isArray {
		p.c.Envelope.Methods = Malformed
		p.dev("methods", "is %s, want an array of strings", kindOf(v))
		return
	}
	p.c.Envelope.Methods = Present
	p.c.Envelope.MethodObjects = l.objects
	p.c.Envelope.MethodInvalid = l.invalid
	p.c.Envelope.MethodNames = l.names
	if l.objects > 0 {
		p.dev("methods", "%d entries are objects, not strings (methods-as-objects)", l.objects)
	}
	if l.invalid > 0 {
		p.dev("methods", "%d entries are neither strings nor objects with a name; skipped", l.invalid)
	}
	if d := duplicates(l.names); len(d) > 0 {
		p.dev("methods", "duplicate entries %s", listSome(d, 5))
	}
}

// advertised returns the names the host lists itself in methods and
// capabilities, used to tell short group methods from qualified ones.
func (p *parser) advertised() map[string]bool {
	set := map[string]bool{}
	for _, key := range []string{"methods", "capabilities"} {
		for _, n := range p.memberNames(key).names {
			set[n] = true
		}
	}
	return set
}

// rawGroup is a provided_capabilities entry before qualification.
type rawGroup struct {
	typ, version, description string
	methods                   []string
}

// readGroups reads provided_capabilities into Groups.
func (p *parser) readGroups() {
	v, ok := p.get("provided_capabilities")
	if !ok {
		return
	}
	arr, ok := v.([]any)
	if !ok {
		p.c.Envelope.ProvidedCapabilities = Malformed
		p.dev("provided_capabilities", "is %s, want an array of {type, methods}", kindOf(v))
		return
	}
	p.c.Envelope.ProvidedCapabilities = Present
	var groups []rawGroup
	for i, e := range arr {
		field := fmt.Sprintf("provided_capabilities[%d]", i)
		obj, ok := e.(map[string]any)
		if !ok {
			p.dev(field, "is %s, want an object {type, methods}", kindOf(e))
			continue
		}
		var g rawGroup
		if t, ok := obj["type"].(string); ok && t != "" {
			g.typ = t
		} else {
			p.dev(field+".type", "missing or not a non-empty string")
		}
		g.version, _ = obj["version"].(string)
		g.description, _ = obj["description"].(string)
		if m := obj["methods"]; m != nil {
			l := namesOf(m)
			switch {
			case !l.isArray:
				p.dev(field+".methods", "is %s, want an array of strings", kindOf(m))
			default:
				if l.objects > 0 {
					p.dev(field+".methods", "%d entries are objects, not strings", l.objects)
				}
				if l.invalid > 0 {
					p.dev(field+".methods", "%d entries skipped (neither strings nor named objects)", l.invalid)
				}
			}
			g.methods = l.names
		} else {
			p.dev(field+".methods", "missing")
		}
		groups = append(groups, g)
	}
	p.qualifyGroups(groups)
}

// qualifyGroups turns the group methods into fully qualified names.
func (p *parser) qualifyGroups(groups []rawGroup) {
	adv := p.advertised()
	// First pass: does this host write group methods short (the standard)
	// or fully qualified (rhizoCrypt, Songbird)?
	short, qualified := 0, 0
	for _, g := range groups {
		for _, m := range g.methods {
			switch {
			case g.typ != "" && strings.HasPrefix(m, g.typ+"."):
				qualified++
			case adv[g.typ+"."+m]:
				short++
			case adv[m] && strings.Contains(m, "."):
				qualified++
			}
		}
	}
	qualifiedStyle := qualified > short
	seenType := map[string]int{}
	fqGroups, fqMethods, fqExample := 0, 0, ""
	for i, g := range groups {
		field := fmt.Sprintf("provided_capabilities[%d].methods", i)
		if g.typ != "" {
			seenType[g.typ]++
			if seenType[g.typ] == 2 {
				p.dev(fmt.Sprintf("provided_capabilities[%d].type", i), "type %q appears in more than one group", g.typ)
			}
		}
		out := Group{Type: g.typ, Version: g.version, Description: g.description}
		var fq, missing []string
		for _, m := range g.methods {
			var name string
			switch {
			case g.typ == "":
				name = m
			case strings.HasPrefix(m, g.typ+"."):
				name = m
				fq = append(fq, m)
			case adv[g.typ+"."+m]:
				name = g.typ + "." + m
			case adv[m] && strings.Contains(m, "."):
				name = m
				fq = append(fq, m)
			case qualifiedStyle && strings.Contains(m, "."):
				name = m
				fq = append(fq, m)
			default:
				name = g.typ + "." + m
			}
			if len(adv) > 0 && !adv[name] {
				missing = append(missing, name)
			}
			out.Methods = append(out.Methods, name)
		}
		if len(fq) > 0 {
			fqGroups++
			fqMethods += len(fq)
			if fqExample == "" {
				fqExample = fmt.Sprintf("type %q lists %q", g.typ, fq[0])
			}
		}
		if len(missing) > 0 {
			p.dev(field, "%d methods are not among the advertised methods: %s", len(missing), listSome(missing, 5))
		}
		out.Methods = dedupe(out.Methods)
		p.c.Groups = append(p.c.Groups, out)
	}
	if fqGroups > 0 {
		p.dev("provided_capabilities", "%d methods in %d groups are fully qualified instead of short names within their type (%s); read as written, not as type.method", fqMethods, fqGroups, fqExample)
	}
}

// readConsumed reads consumed_capabilities, strings or objects.
func (p *parser) readConsumed() {
	v, ok := p.get("consumed_capabilities")
	if !ok {
		return
	}
	arr, ok := v.([]any)
	if !ok {
		p.c.Envelope.ConsumedCapabilities = Malformed
		p.dev("consumed_capabilities", "is %s, want an array of method names", kindOf(v))
		return
	}
	p.c.Envelope.ConsumedCapabilities = Present
	objects := 0
	var tokens []string
	for i, e := range arr {
		if s, ok := e.(string); ok {
			p.c.Consumed = append(p.c.Consumed, Consumed{Name: s})
			if checkMethodName(s) != nil {
				tokens = append(tokens, s)
			}
			continue
		}
		obj, ok := e.(map[string]any)
		if !ok {
			p.dev(fmt.Sprintf("consumed_capabilities[%d]", i), "is %s; skipped", kindOf(e))
			continue
		}
		objects++
		name := ""
		for _, k := range []string{"method", "name", "capability", "type"} {
			if n, ok := obj[k].(string); ok && n != "" {
				name = n
				break
			}
		}
		if name == "" {
			p.dev(fmt.Sprintf("consumed_capabilities[%d]", i), "object without type, name, method or capability; skipped")
			continue
		}
		cc := Consumed{Name: name}
		cc.Reason, _ = obj["reason"].(string)
		if b, ok := obj["required"].(bool); ok {
			cc.Required = &b
		}
		p.c.Consumed = append(p.c.Consumed, cc)
		if checkMethodName(name) != nil {
			tokens = append(tokens, name)
		}
	}
	if objects > 0 {
		p.dev("consumed_capabilities", "%d entries are objects, not method-name strings", objects)
	}
	if len(tokens) > 0 {
		p.dev("consumed_capabilities", "%d entries are not method names (domain.operation): %s", len(tokens), listSome(tokens, 5))
	}
}

// readCosts reads cost_estimates leniently, field by field.
func (p *parser) readCosts() {
	v, ok := p.get("cost_estimates")
	if !ok {
		return
	}
	obj, ok := v.(map[string]any)
	if !ok {
		p.c.Envelope.CostEstimates = Malformed
		p.dev("cost_estimates", "is %s, want an object {method: {cpu, latency_ms}}", kindOf(v))
		return
	}
	p.c.Envelope.CostEstimates = Present
	p.c.CostEstimates = make(map[string]CostEstimate, len(obj))
	for _, method := range sortedKeys(obj) {
		field := "cost_estimates." + method
		fields, ok := obj[method].(map[string]any)
		if !ok {
			p.dev(field, "is %s, want an object", kindOf(obj[method]))
			continue
		}
		var ce CostEstimate
		if r, ok := fields["cpu"]; ok {
			if ce.CPU, ok = r.(string); !ok {
				p.dev(field+".cpu", "is %s, want a string", kindOf(r))
			}
		}
		if r, ok := fields["latency_ms"]; ok {
			n, isNum := r.(json.Number)
			f, err := n.Float64()
			if !isNum || err != nil {
				p.dev(field+".latency_ms", "is %s, want a number", kindOf(r))
			} else {
				ce.LatencyMS = f
			}
		}
		if r, ok := fields["memory_bytes"]; ok && r != nil {
			n, isNum := r.(json.Number)
			i, err := n.Int64()
			if !isNum || err != nil {
				p.dev(field+".memory_bytes", "is not an integer")
			} else {
				ce.MemoryBytes = &i
			}
		}
		if r, ok := fields["gpu_eligible"]; ok && r != nil {
			b, isBool := r.(bool)
			if !isBool {
				p.dev(field+".gpu_eligible", "is %s, want a boolean", kindOf(r))
			} else {
				ce.GPUEligible = &b
			}
		}
		p.c.CostEstimates[method] = ce
	}
}

// readDeps reads operation_dependencies.
func (p *parser) readDeps() {
	v, ok := p.get("operation_dependencies")
	if !ok {
		return
	}
	obj, ok := v.(map[string]any)
	if !ok {
		p.c.Envelope.OperationDependencies = Malformed
		p.dev("operation_dependencies", "is %s, want an object {method: [prerequisites]}", kindOf(v))
		return
	}
	p.c.Envelope.OperationDependencies = Present
	p.c.OperationDependencies = make(map[string][]string, len(obj))
	for _, method := range sortedKeys(obj) {
		l := namesOf(obj[method])
		if !l.isArray {
			p.dev("operation_dependencies."+method, "is %s, want an array of method names", kindOf(obj[method]))
			continue
		}
		if l.invalid > 0 {
			p.dev("operation_dependencies."+method, "%d entries skipped", l.invalid)
		}
		p.c.OperationDependencies[method] = l.names
	}
}

// readTransport reads protocol and transport.
func (p *parser) readTransport() {
	if v, ok := p.get("protocol"); ok {
		s, isStr := v.(string)
		switch {
		case !isStr:
			p.dev("protocol", "is %s, want a string", kindOf(v))
		case s != Protocol:
			p.c.Protocol = s
			p.dev("protocol", "is %q, the standard's value is %q", s, Protocol)
		default:
			p.c.Protocol = s
		}
	}
	if v, ok := p.get("transport"); ok {
		if one, isStr := v.(string); isStr {
			p.c.Transport = []string{one}
			p.dev("transport", "is a string, want an array of strings")
		} else if l := namesOf(v); l.isArray {
			p.c.Transport = l.names
			if l.invalid+l.objects > 0 {
				p.dev("transport", "%d entries are not strings", l.invalid+l.objects)
			}
		} else {
			p.dev("transport", "is %s, want an array of strings", kindOf(v))
		}
	}
}

// readSigned reads signed_announcement and transport_security with
// encoding/json's strict typing: a wrong type in either makes it unusable.
func (p *parser) readSigned() {
	if raw, ok := p.raw["signed_announcement"]; ok && string(raw) != "null" {
		var sa SignedAnnouncement
		if err := json.Unmarshal(raw, &sa); err != nil {
			p.dev("signed_announcement", "malformed: %v", err)
		} else {
			p.c.SignedAnnouncement = &sa
		}
	}
	if raw, ok := p.raw["transport_security"]; ok && string(raw) != "null" {
		var ts TransportSecurity
		if err := json.Unmarshal(raw, &ts); err != nil {
			p.dev("transport_security", "malformed: %v", err)
		} else {
			p.c.TransportSecurity = &ts
		}
	}
}

// compareCapabilitiesAndMethods notes when capabilities and methods, both
// present, disagree (loamSpine lists domain tokens in capabilities).
func (p *parser) compareCapabilitiesAndMethods() {
	ms := p.memberNames("methods").names
	cs := p.memberNames("capabilities").names
	if len(ms) == 0 || len(cs) == 0 {
		return
	}
	onlyC := difference(cs, ms)
	onlyM := difference(ms, cs)
	if len(onlyC) == 0 && len(onlyM) == 0 {
		return
	}
	p.dev("capabilities", "disagrees with methods: %d names only in capabilities %s, %d only in methods %s",
		len(onlyC), listSome(onlyC, 5), len(onlyM), listSome(onlyM, 5))
}

// extract returns the names one source yields (nil when none). For
// provided_capabilities it also records the group types in types. Object
// keys (semantic_mappings, the key fallback) come in sorted order, as
// serde_json — and so biomeOS and primalSpring — produce them.
func (p *parser) extract(s Source, types map[string]bool) []string {
	if p.isArray {
		if s != SourceArray {
			return nil
		}
		return namesOf(p.array).names
	}
	switch s {
	case SourceMethods, SourceCapabilities:
		return p.memberNames(string(s)).names
	case SourceMethodInfo:
		v, _ := p.get("method_info")
		arr, _ := v.([]any)
		var out []string
		for _, e := range arr {
			if n, _ := nameOfObject(e); n != "" {
				out = append(out, n)
			}
		}
		return out
	case SourceSemanticMappings:
		v, _ := p.get("semantic_mappings")
		domains, _ := v.(map[string]any)
		var out []string
		for _, d := range sortedKeys(domains) {
			if verbs, ok := domains[d].(map[string]any); ok {
				for _, verb := range sortedKeys(verbs) {
					out = append(out, d+"."+verb)
				}
				continue
			}
			out = append(out, d)
		}
		return out
	case SourceProvidedCapabilities:
		var out []string
		for _, g := range p.c.Groups {
			if g.Type != "" {
				out = append(out, g.Type)
				types[g.Type] = true
			}
			out = append(out, g.Methods...)
		}
		return out
	case SourceObjectKeys:
		return sortedKeys(p.raw)
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func dedupe(in []string) []string {
	seen := make(map[string]bool, len(in))
	out := make([]string, 0, len(in))
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

func duplicates(in []string) []string {
	seen := make(map[string]int, len(in))
	var out []string
	for _, s := range in {
		seen[s]++
		if seen[s] == 2 {
			out = append(out, s)
		}
	}
	return out
}

// difference returns the elements of a not in b, in a's order.
func difference(a, b []string) []string {
	inB := make(map[string]bool, len(b))
	for _, s := range b {
		inB[s] = true
	}
	var out []string
	for _, s := range dedupe(a) {
		if !inB[s] {
			out = append(out, s)
		}
	}
	return out
}

// listSome renders up to n names, noting how many more there are.
func listSome(names []string, n int) string {
	if len(names) <= n {
		return "[" + strings.Join(names, ", ") + "]"
	}
	return "[" + strings.Join(slices.Clip(names[:n]), ", ") + fmt.Sprintf(", … %d more]", len(names)-n)
}
