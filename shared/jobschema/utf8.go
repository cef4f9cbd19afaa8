package jobschema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// checkUTF8 reports text that is not valid UTF-8, naming the member that holds it. Go's JSON
// decoder would quietly turn such bytes into U+FFFD, so a target would receive something other
// than what the client sent; refusing it is what a client can act on. Paths drop a leading
// "properties." when trim is set (a job's paths are relative to its properties).
func checkUTF8(raw []byte, trim bool, probs *problems) bool {
	off := invalidUTF8(raw)
	if off < 0 {
		return true
	}
	at := pathAt(raw, off)
	if head, rest, _ := strings.Cut(at, "."); trim && strings.EqualFold(head, "properties") {
		at = rest
	}
	probs.add(at, fmt.Sprintf("is not valid UTF-8 text (byte 0x%02x at offset %d of the document)", raw[off], off))
	return false
}

// invalidUTF8 returns the offset of the first byte that does not start a valid UTF-8 sequence,
// or -1.
func invalidUTF8(b []byte) int {
	for i := 0; i < len(b); {
		if b[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return -1
}

// pathAt returns the JSON path of the value whose text covers byte offset off, as the paths
// of problems are written (request.body, headers.X-Name, hours[2]); "" when the document does
// not parse that far or the byte is outside every value.
func pathAt(raw []byte, off int) string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	// frame is one open container: for an object, the member whose value comes next; for an
	// array, the index of the next element.
	type frame struct {
		object bool
		key    string
		index  int
		keyed  bool // the object's next token is a value (its key has been read)
	}
	var stack []frame
	path := func(last bool) string {
		var p jsonPath
		for i, f := range stack {
			switch {
			case f.object && (f.keyed || i < len(stack)-1 || last):
				p = p.key(f.key)
			case !f.object:
				p = p.index(f.index)
			}
		}
		return string(p)
	}
	for {
		start := dec.InputOffset()
		tok, err := dec.Token()
		if err == io.EOF || err != nil {
			return ""
		}
		end := int(dec.InputOffset())
		top := len(stack) - 1
		isKey := top >= 0 && stack[top].object && !stack[top].keyed
		if _, ok := tok.(json.Delim); !ok && int(start) <= off && off < end {
			if isKey { // the bad byte is in a member's name: the object holds it
				stack = stack[:top+1]
				return path(false)
			}
			return path(true)
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			stack = append(stack, frame{object: tok == json.Delim('{')})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:top]
		default:
			if isKey {
				stack[top].key, stack[top].keyed = tok.(string), true
				continue
			}
		}
		// A value ended: move its container on to the next member or element.
		if top = len(stack) - 1; top >= 0 {
			if stack[top].object {
				stack[top].keyed = false
			} else {
				stack[top].index++
			}
		}
	}
}

// CheckText refuses a document holding text that is not valid UTF-8, with a *ValidationError
// naming the member (paths relative to a job's properties). Decode does this itself; a caller
// that reads a document another way (a patch, merged before it is decoded) calls it first.
func CheckText(raw []byte) error {
	probs := &problems{}
	checkUTF8(raw, true, probs)
	return probs.err()
}
