package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/capmesh/capmesh/jsonrpc/internal/jsontext"
)

// Request is one call or notification: as received by a Handler, or as
// built by a Client.
type Request struct {
	// ID is the request id exactly as it appeared on the wire (a JSON
	// string, number or null); nil for a notification. Responses echo these
	// bytes unchanged.
	ID json.RawMessage
	// Method is the decoded method name.
	Method string
	// Params is the raw params value (an object or an array), or nil when
	// the request had none.
	Params json.RawMessage
}

// IsNotification reports whether r is a notification, i.e. has no id and
// gets no reply.
func (r *Request) IsNotification() bool { return r.ID == nil }

// UnmarshalParams decodes the params into v with encoding/json. Absent
// params decode as an empty object, so handlers with optional arguments need
// no special case. On failure it returns an *Error with code InvalidParams
// whose message names the offending field.
func (r *Request) UnmarshalParams(v any) error {
	p := r.Params
	if len(p) == 0 {
		p = []byte("{}")
	}
	if err := json.Unmarshal(p, v); err != nil {
		return paramsError(err)
	}
	return nil
}

// UnmarshalParamsStrict is UnmarshalParams with unknown object members
// rejected.
func (r *Request) UnmarshalParamsStrict(v any) error {
	p := r.Params
	if len(p) == 0 {
		p = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(p))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return paramsError(err)
	}
	return nil
}

func paramsError(err error) *Error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		if field == "" {
			field = "params"
		}
		return Errorf(InvalidParams, "invalid params: %s: want %s, got JSON %s", field, te.Type, te.Value)
	}
	return Errorf(InvalidParams, "invalid params: %v", err)
}

// inbound is one decoded element of a frame: a well-formed request, or the
// error that answers a malformed one (with the id if one could be read).
type inbound struct {
	req Request
	err *Error
}

// decodeFrame splits one frame into requests, validating it in the same
// pass. A frame is a single request object or a batch array. perr is set
// when the frame is not JSON at all (ParseError) or is an empty batch, a
// batch of more than maxBatch elements (0: no bound) or neither object nor
// array (InvalidRequest); the caller answers it with a single error and
// id null. Elements past maxBatch are validated but not decoded, so a huge
// batch costs no memory beyond its bytes.
func decodeFrame(data []byte, maxBatch int) (single inbound, batch []inbound, isBatch bool, perr *Error) {
	parseErr := func(err error) (inbound, []inbound, bool, *Error) {
		return inbound{}, nil, false, Errorf(ParseError, "Parse error: %v", err)
	}
	trailing := func(end int) error {
		if j := jsontext.SkipSpace(data, end); j != len(data) {
			return &jsontext.SyntaxError{Msg: "invalid character after top-level value", Offset: j}
		}
		return nil
	}
	i := jsontext.SkipSpace(data, 0)
	if i == len(data) {
		return parseErr(&jsontext.SyntaxError{Msg: "unexpected end of input", Offset: i})
	}
	switch data[i] {
	case '{':
		in, end, err := decodeObject(data, i)
		if err == nil {
			err = trailing(end)
		}
		if err != nil {
			return parseErr(err)
		}
		return in, nil, false, nil
	case '[':
		j := jsontext.SkipSpace(data, i+1)
		if j < len(data) && data[j] == ']' {
			if err := trailing(j + 1); err != nil {
				return parseErr(err)
			}
			return inbound{}, nil, false, Errorf(InvalidRequest, "Invalid Request: empty batch")
		}
		for {
			if j >= len(data) {
				return parseErr(&jsontext.SyntaxError{Msg: "unexpected end of input in array", Offset: j})
			}
			var in inbound
			var end int
			var err error
			if maxBatch > 0 && len(batch) >= maxBatch {
				// Over the bound: only check that the frame is JSON.
				n, end, err := scanRest(data, j)
				if err == nil {
					err = trailing(end)
				}
				if err != nil {
					return parseErr(err)
				}
				return inbound{}, nil, false, Errorf(InvalidRequest, "Invalid Request: a batch of %d elements exceeds the limit of %d", len(batch)+n, maxBatch)
			}
			if data[j] == '{' {
				in, end, err = decodeObject(data, j)
			} else {
				end, err = jsontext.ScanValue(data, j, 1)
				if err == nil {
					in = inbound{err: Errorf(InvalidRequest, "Invalid Request: a request must be a JSON object, got %s", kindOf(data[j]))}
				}
			}
			if err != nil {
				return parseErr(err)
			}
			batch = append(batch, in)
			j = jsontext.SkipSpace(data, end)
			if j >= len(data) {
				return parseErr(&jsontext.SyntaxError{Msg: "unexpected end of input in array", Offset: j})
			}
			switch data[j] {
			case ',':
				j = jsontext.SkipSpace(data, j+1)
			case ']':
				if err := trailing(j + 1); err != nil {
					return parseErr(err)
				}
				return inbound{}, batch, true, nil
			default:
				return parseErr(&jsontext.SyntaxError{Msg: "expected ',' or ']' in array", Offset: j})
			}
		}
	default:
		end, err := jsontext.ScanValue(data, i, 0)
		if err == nil {
			err = trailing(end)
		}
		if err != nil {
			return parseErr(err)
		}
		return inbound{}, nil, false, Errorf(InvalidRequest, "Invalid Request: a request must be a JSON object or a batch array, got %s", kindOf(data[i]))
	}
}

// scanRest validates the rest of an array from its element at data[j] to
// its closing bracket, and returns the number of elements and the offset
// just past the bracket.
func scanRest(data []byte, j int) (n, end int, err error) {
	for {
		if end, err = jsontext.ScanValue(data, j, 1); err != nil {
			return n, end, err
		}
		n++
		j = jsontext.SkipSpace(data, end)
		switch {
		case j < len(data) && data[j] == ',':
			j = jsontext.SkipSpace(data, j+1)
		case j < len(data) && data[j] == ']':
			return n, j + 1, nil
		default:
			return n, j, &jsontext.SyntaxError{Msg: "expected ',' or ']' in array", Offset: j}
		}
	}
}

func kindOf(c byte) string {
	switch c {
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	case '[':
		return "an array"
	case '{':
		return "an object"
	default:
		return "a number"
	}
}

// decodeObject validates the object starting at data[i] == '{' and decodes
// it as a request, returning the offset just past it. A syntax error makes
// the whole frame a parse error; a well-formed object that is not a valid
// request yields an inbound carrying the InvalidRequest error.
func decodeObject(data []byte, i int) (inbound, int, error) {
	var (
		in                          inbound
		version, method             []byte
		badID                       bool
		badParams                   string
		versionEscaped, methodFound bool
	)
	i = jsontext.SkipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		i++
	} else {
		for {
			if i >= len(data) || data[i] != '"' {
				return in, i, &jsontext.SyntaxError{Msg: "expected string for object key", Offset: i}
			}
			ks := i
			ke, err := jsontext.ScanString(data, i)
			if err != nil {
				return in, ke, err
			}
			i = jsontext.SkipSpace(data, ke)
			if i >= len(data) || data[i] != ':' {
				return in, i, &jsontext.SyntaxError{Msg: "expected ':' after object key", Offset: i}
			}
			vs := jsontext.SkipSpace(data, i+1)
			ve, err := jsontext.ScanValue(data, vs, 1)
			if err != nil {
				return in, ve, err
			}
			key := data[ks+1 : ke-1]
			if bytes.IndexByte(key, '\\') >= 0 {
				key = []byte(jsontext.Unquote(data[ks:ke]))
			}
			val := data[vs:ve:ve]
			switch string(key) {
			case "jsonrpc":
				version = val
				versionEscaped = bytes.IndexByte(val, '\\') >= 0
			case "method":
				method, methodFound = val, true
			case "id":
				switch val[0] {
				case '"', 'n', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
					in.req.ID, badID = json.RawMessage(val), false
				default:
					in.req.ID, badID = nil, true
				}
			case "params":
				switch val[0] {
				case '{', '[':
					in.req.Params, badParams = json.RawMessage(val), ""
				case 'n': // null: treated as absent (see docs/DECISIONS.md)
					in.req.Params, badParams = nil, ""
				default:
					badParams = kindOf(val[0])
				}
			}
			i = jsontext.SkipSpace(data, ve)
			if i >= len(data) {
				return in, i, &jsontext.SyntaxError{Msg: "unexpected end of input in object", Offset: i}
			}
			if data[i] == ',' {
				i = jsontext.SkipSpace(data, i+1)
				continue
			}
			if data[i] != '}' {
				return in, i, &jsontext.SyntaxError{Msg: "expected ',' or '}' in object", Offset: i}
			}
			i++
			break
		}
	}
	switch {
	case badID:
		in.err = Errorf(InvalidRequest, "Invalid Request: id must be a string, a number or null")
	case version == nil:
		in.err = Errorf(InvalidRequest, `Invalid Request: missing "jsonrpc": "2.0"`)
	case !(string(version) == `"2.0"` || (versionEscaped && version[0] == '"' && jsontext.Unquote(version) == "2.0")):
		in.err = Errorf(InvalidRequest, `Invalid Request: "jsonrpc" must be "2.0", got %s`, truncate(version))
	case !methodFound:
		in.err = Errorf(InvalidRequest, "Invalid Request: missing method")
	case method[0] != '"':
		in.err = Errorf(InvalidRequest, "Invalid Request: method must be a string, got %s", kindOf(method[0]))
	case badParams != "":
		in.err = Errorf(InvalidRequest, "Invalid Request: params must be an object or an array, got %s", badParams)
	default:
		in.req.Method = unquoteMethod(method)
	}
	if in.err != nil && badID {
		in.req.ID = nil
	}
	return in, i, nil
}

// unquoteMethod interns the method strings of recent requests so that the
// common case (a handful of distinct methods) allocates nothing per call.
func unquoteMethod(tok []byte) string {
	if bytes.IndexByte(tok, '\\') >= 0 {
		return jsontext.Unquote(tok)
	}
	return jsontext.Intern(tok[1 : len(tok)-1])
}

func truncate(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "…"
	}
	return string(b)
}

var nullID = json.RawMessage("null")

// appendResult appends a success response.
func appendResult(dst []byte, id json.RawMessage, result []byte) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","result":`...)
	dst = append(dst, result...)
	dst = append(dst, `,"id":`...)
	if id == nil {
		id = nullID
	}
	dst = append(dst, id...)
	return append(dst, '}')
}

// appendError appends an error response.
func appendError(dst []byte, id json.RawMessage, e *Error) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","error":{"code":`...)
	dst = strconv.AppendInt(dst, int64(e.Code), 10)
	dst = append(dst, `,"message":`...)
	msg := e.Message
	if msg == "" {
		msg = e.Code.String()
	}
	dst = jsontext.AppendString(dst, msg)
	if len(e.Data) > 0 && json.Valid(e.Data) {
		dst = append(dst, `,"data":`...)
		dst = append(dst, e.Data...)
	}
	dst = append(dst, `},"id":`...)
	if id == nil {
		id = nullID
	}
	dst = append(dst, id...)
	return append(dst, '}')
}

// appendRequest appends a request (id != nil) or notification (id == nil).
func appendRequest(dst []byte, method string, params json.RawMessage, id json.RawMessage) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","method":`...)
	dst = jsontext.AppendString(dst, method)
	if len(params) > 0 {
		dst = append(dst, `,"params":`...)
		dst = append(dst, params...)
	}
	if id != nil {
		dst = append(dst, `,"id":`...)
		dst = append(dst, id...)
	}
	return append(dst, '}')
}

// marshalParams encodes client params: nil means none; json.RawMessage is
// used as is; anything else must encode to an object or an array.
func marshalParams(params any) (json.RawMessage, error) {
	switch p := params.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		if len(p) == 0 {
			return nil, nil
		}
		return checkStructured(p)
	case []byte:
		return checkStructured(p)
	}
	b, err := json.Marshal(params)
	if err != nil {
		return nil, fmt.Errorf("jsonrpc: encoding params: %w", err)
	}
	if string(b) == "null" {
		return nil, nil
	}
	return checkStructured(b)
}

func checkStructured(b []byte) (json.RawMessage, error) {
	i := jsontext.SkipSpace(b, 0)
	if i >= len(b) || (b[i] != '{' && b[i] != '[') || !json.Valid(b) {
		return nil, errors.New("jsonrpc: params must be a JSON object or array")
	}
	return b, nil
}

// response is a decoded reply, as seen by a client.
type response struct {
	id     json.RawMessage
	result json.RawMessage
	err    *Error
}

// clientMsg is one message as received by a client: a response, or a
// notification the server sent (method set, no id).
type clientMsg struct {
	response
	method     string
	params     json.RawMessage
	hasMethod  bool
	hasResult  bool
	errDecoded error
}

// decodeClientMsg validates the object at data[i] == '{' and decodes it in
// the same pass, returning the offset just past it.
func decodeClientMsg(data []byte, i int) (clientMsg, int, error) {
	var m clientMsg
	i = jsontext.SkipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		return m, i + 1, nil
	}
	for {
		if i >= len(data) || data[i] != '"' {
			return m, i, &jsontext.SyntaxError{Msg: "expected string for object key", Offset: i}
		}
		ks := i
		ke, err := jsontext.ScanString(data, i)
		if err != nil {
			return m, ke, err
		}
		i = jsontext.SkipSpace(data, ke)
		if i >= len(data) || data[i] != ':' {
			return m, i, &jsontext.SyntaxError{Msg: "expected ':' after object key", Offset: i}
		}
		vs := jsontext.SkipSpace(data, i+1)
		ve, err := jsontext.ScanValue(data, vs, 1)
		if err != nil {
			return m, ve, err
		}
		key := data[ks+1 : ke-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			key = []byte(jsontext.Unquote(data[ks:ke]))
		}
		val := data[vs:ve:ve]
		switch string(key) {
		case "id":
			m.id = val
		case "result":
			m.result, m.hasResult = val, true
		case "error":
			var e Error
			if err := json.Unmarshal(val, &e); err != nil {
				m.errDecoded = fmt.Errorf("malformed error object: %w", err)
			} else {
				m.err = &e
			}
		case "method":
			if val[0] == '"' {
				m.method, m.hasMethod = unquoteMethod(val), true
			}
		case "params":
			m.params = val
		}
		i = jsontext.SkipSpace(data, ve)
		if i >= len(data) {
			return m, i, &jsontext.SyntaxError{Msg: "unexpected end of input in object", Offset: i}
		}
		if data[i] == ',' {
			i = jsontext.SkipSpace(data, i+1)
			continue
		}
		if data[i] != '}' {
			return m, i, &jsontext.SyntaxError{Msg: "expected ',' or '}' in object", Offset: i}
		}
		return m, i + 1, nil
	}
}

// decodeResponse decodes one response object (used by the HTTP client).
func decodeResponse(v []byte) (response, error) {
	i := jsontext.SkipSpace(v, 0)
	if i >= len(v) || v[i] != '{' {
		if i < len(v) {
			if _, err := jsontext.ScanValue(v, i, 0); err != nil {
				return response{}, err
			}
			return response{}, fmt.Errorf("response is %s, not an object", kindOf(v[i]))
		}
		return response{}, errors.New("empty response")
	}
	m, end, err := decodeClientMsg(v, i)
	if err != nil {
		return response{}, err
	}
	if j := jsontext.SkipSpace(v, end); j != len(v) {
		return response{}, &jsontext.SyntaxError{Msg: "invalid character after top-level value", Offset: j}
	}
	if m.errDecoded != nil {
		return response{}, m.errDecoded
	}
	if !m.hasResult && m.err == nil {
		return response{}, errors.New("response has neither result nor error")
	}
	return m.response, nil
}
