// Package logtest checks log output in tests.
package logtest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// CheckJSONLines checks that every line of out is one JSON object whose
// objects, nested ones included, never repeat a member name: encoding/json,
// jq and CloudWatch keep only one of two, so a repeated name loses data.
func CheckJSONLines(out []byte) error {
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	var errs []error
	for n := 1; sc.Scan(); n++ {
		if err := checkLine(sc.Bytes()); err != nil {
			errs = append(errs, fmt.Errorf("line %d: %w: %s", n, err, sc.Bytes()))
		}
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func checkLine(line []byte) error {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok != json.Delim('{') {
		return errors.New("not a JSON object")
	}
	if err := checkObject(dec, "$"); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("more than one JSON value")
	}
	return nil
}

// checkObject reads an object's members, its '{' already read.
func checkObject(dec *json.Decoder, path string) error {
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		name := tok.(string)
		if seen[name] {
			return fmt.Errorf("member %q repeated in %s", name, path)
		}
		seen[name] = true
		if err := checkValue(dec, path+"."+name); err != nil {
			return err
		}
	}
	_, err := dec.Token() // '}'
	return err
}

func checkValue(dec *json.Decoder, path string) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('{'):
		return checkObject(dec, path)
	case json.Delim('['):
		for i := 0; dec.More(); i++ {
			if err := checkValue(dec, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		_, err := dec.Token() // ']'
		return err
	}
	return nil
}
