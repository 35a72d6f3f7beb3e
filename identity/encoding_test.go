package identity

import (
	"bytes"
	"strings"
	"testing"
)

func TestEncodingRoundTrip(t *testing.T) {
	data := [][]byte{{}, {0}, {0xff}, []byte("hello, world"), bytes.Repeat([]byte{0xfb, 0xff, 0xbf}, 22)}
	for _, enc := range []Encoding{Base64, Hex, Base64URL} {
		for _, b := range data {
			s := Encode(b, enc)
			got, err := Decode(s, enc)
			if err != nil || !bytes.Equal(got, b) {
				t.Errorf("%v: Decode(Encode(%x)) = %x, %v", enc, b, got, err)
			}
		}
	}
	if got := Encode([]byte{0xfb, 0xff}, Base64URL); got != "-_8=" {
		t.Errorf("base64url is written padded: %q", got)
	}
	if got := Encode([]byte{0xAB}, Hex); got != "ab" {
		t.Errorf("hex is written lowercase: %q", got)
	}
	if got := Encode([]byte("é"), UTF8); got != "é" {
		t.Errorf("utf8: %q", got)
	}
	if got := Encode([]byte("x"), None); got != "" {
		t.Errorf("none: %q", got)
	}
}

func TestDecodeStrictness(t *testing.T) {
	for _, tc := range []struct {
		s    string
		enc  Encoding
		want string // hex of the result, or "!" + part of the error
	}{
		{"aGk=", Base64, "6869"},
		{"aGk", Base64, "!base64"},          // padding required
		{"aGk=\n", Base64, "!line break"},   // Go would skip it
		{"aG\r\nk=", Base64, "!line break"}, // likewise
		{" aGk=", Base64, "!base64"},        // no whitespace
		{"aGl=", Base64, "!base64"},         // non-zero unused bits
		{"-_8=", Base64, "!base64"},         // URL alphabet
		{"+/8=", Base64, "fbff"},            //
		{"-_8=", Base64URL, "fbff"},         // padded
		{"-_8", Base64URL, "fbff"},          // unpadded
		{"+/8=", Base64URL, "!base64url"},   // std alphabet
		{"-_8\n", Base64URL, "!line break"}, //
		{"0xABcd", Hex, "abcd"},             // prefix and either case
		{"0XABCD", Hex, "abcd"},             //
		{"abc", Hex, "!hex"},                // odd length
		{"zz", Hex, "!hex"},                 //
		{"é", UTF8, "c3a9"},                 //
		{"anything", None, ""},              // as bearDog: no data
		{"", Base64, ""},                    //
		{"", Hex, ""},                       //
	} {
		got, err := Decode(tc.s, tc.enc)
		if strings.HasPrefix(tc.want, "!") {
			if err == nil || !strings.Contains(err.Error(), tc.want[1:]) {
				t.Errorf("Decode(%q, %v) = %x, %v; want an error mentioning %q", tc.s, tc.enc, got, err, tc.want[1:])
			}
			continue
		}
		if err != nil || Encode(got, Hex) != tc.want {
			t.Errorf("Decode(%q, %v) = %x, %v; want %s", tc.s, tc.enc, got, err, tc.want)
		}
	}
	if _, err := Decode("x", Encoding(9)); err == nil {
		t.Error("unknown encoding decoded")
	}
}

func TestParseEncoding(t *testing.T) {
	for hint, want := range map[string]Encoding{"": Base64, "base64": Base64, "hex": Hex, "base64url": Base64URL, "utf8": UTF8, "none": None} {
		got, err := ParseEncoding(hint)
		if err != nil || got != want {
			t.Errorf("ParseEncoding(%q) = %v, %v", hint, got, err)
		}
		if hint != "" && got.String() != hint {
			t.Errorf("%v.String() = %q", got, got.String())
		}
	}
	for _, hint := range []string{"Base64", "HEX", "b64", "utf-8", "base64 "} {
		if _, err := ParseEncoding(hint); err == nil {
			t.Errorf("ParseEncoding(%q) accepted", hint)
		}
	}
	if Encoding(9).String() != "Encoding(9)" {
		t.Error(Encoding(9).String())
	}
}

func TestDecodeAny(t *testing.T) {
	key := bytes.Repeat([]byte{0xfb}, 32)
	for _, tc := range []struct {
		s   string
		enc Encoding
	}{
		{Encode(key, Hex), Hex},
		{"0x" + Encode(key, Hex), Hex},
		{strings.ToUpper(Encode(key, Hex)), Hex},
		{Encode(key, Base64), Base64},
		{Encode(key, Base64URL), Base64URL},
		{strings.TrimRight(Encode(key, Base64URL), "="), Base64URL},
	} {
		got, enc, err := DecodeAny(tc.s, 32)
		if err != nil || enc != tc.enc || !bytes.Equal(got, key) {
			t.Errorf("DecodeAny(%q) = %x, %v, %v; want %v", tc.s, got, enc, err, tc.enc)
		}
	}
	for _, s := range []string{"", "abcd", Encode(key[:31], Hex), Encode(key, Hex) + "00", Encode(key[:31], Base64) + "AA", strings.TrimRight(Encode(key, Base64), "=")} {
		if got, _, err := DecodeAny(s, 32); err == nil {
			t.Errorf("DecodeAny(%q) = %x, want an error", s, got)
		}
	}
	sig := bytes.Repeat([]byte{0xfb, 0xff}, 32) // has "-_" in base64url
	for _, enc := range []Encoding{Hex, Base64, Base64URL} {
		if got, e, err := DecodeAny(Encode(sig, enc), 64); err != nil || e != enc || !bytes.Equal(got, sig) {
			t.Errorf("64-byte %v: %x, %v, %v", enc, got, e, err)
		}
	}
}
