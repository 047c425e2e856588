package ddbchaos

import (
	"fmt"
	"strings"

	"github.com/truora/minidyn/server"
)

// DynamoDB's limits (Amazon DynamoDB Developer Guide, "Quotas"; the
// TransactWriteItems API reference).
const (
	MaxItemBytes         = 400 * 1024
	MaxPartitionKeyBytes = 2048
	MaxSortKeyBytes      = 1024
	MaxTransactActions   = 100
	MaxTransactBytes     = 4 << 20
	MaxBatchWrite        = 25
	MaxBatchGet          = 100
)

// itemSize is an item's size as DynamoDB counts it: each attribute's name
// and value in bytes.
func itemSize(item map[string]*server.AttributeValue) int {
	n := 0
	for k, v := range item {
		n += len(k) + valueSize(v)
	}
	return n
}

// valueSize follows "Item sizes and formats": strings and binaries by
// their length, numbers by about one byte per two significant digits plus
// one, null and booleans one byte, lists and maps three bytes plus one per
// element and their contents.
func valueSize(v *server.AttributeValue) int {
	if v == nil {
		return 0
	}
	switch {
	case v.S != nil:
		return len(*v.S)
	case v.N != nil:
		return numberSize(*v.N)
	case v.B != nil:
		return len(v.B)
	case v.BOOL != nil, v.NULL != nil:
		return 1
	case v.SS != nil:
		n := 0
		for _, s := range v.SS {
			if s != nil {
				n += len(*s)
			}
		}
		return n
	case v.NS != nil:
		n := 0
		for _, s := range v.NS {
			if s != nil {
				n += numberSize(*s)
			}
		}
		return n
	case v.BS != nil:
		n := 0
		for _, b := range v.BS {
			n += len(b)
		}
		return n
	case v.M != nil:
		n := 3
		for k, e := range v.M {
			n += len(k) + valueSize(e) + 1
		}
		return n
	case v.L != nil:
		n := 3
		for _, e := range v.L {
			n += valueSize(e) + 1
		}
		return n
	}
	return 0
}

func numberSize(s string) int {
	s = strings.TrimLeft(s, "-+")
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		s = s[:i]
	}
	s = strings.Trim(strings.ReplaceAll(s, ".", ""), "0")
	return (len(s)+1)/2 + 1
}

// checkValue refuses the attribute values DynamoDB refuses anywhere: empty
// and duplicated sets. It also refuses empty maps and lists, which
// DynamoDB stores but minidyn reads back as a different attribute: code
// that stores one works here and breaks on AWS's answers, or the reverse,
// so fluidbox never stores them.
func checkValue(path string, v *server.AttributeValue) error {
	if v == nil {
		return fmt.Errorf("One or more parameter values were invalid: Supplied AttributeValue is empty, must contain exactly one of the supported datatypes (%s)", path)
	}
	dup := func(kind string, elems []string) error {
		if len(elems) == 0 {
			return fmt.Errorf("One or more parameter values were invalid: An %s set  may not be empty (%s)", kind, path)
		}
		seen := map[string]bool{}
		for _, e := range elems {
			if seen[e] {
				return fmt.Errorf("One or more parameter values were invalid: Input collection contains duplicates (%s)", path)
			}
			seen[e] = true
		}
		return nil
	}
	switch {
	case v.SS != nil:
		return dup("string", derefAll(v.SS))
	case v.NS != nil:
		return dup("number", derefAll(v.NS))
	case v.BS != nil:
		elems := make([]string, len(v.BS))
		for i, b := range v.BS {
			elems[i] = string(b)
		}
		return dup("binary", elems)
	case v.M != nil:
		if len(v.M) == 0 {
			return fmt.Errorf("fluidbox test layer: an empty map at %s: minidyn reads it back as another type; never store empty maps", path)
		}
		for k, e := range v.M {
			if err := checkValue(path+"."+k, e); err != nil {
				return err
			}
		}
	case v.L != nil:
		if len(v.L) == 0 {
			return fmt.Errorf("fluidbox test layer: an empty list at %s: minidyn reads it back as another type; never store empty lists", path)
		}
		for i, e := range v.L {
			if err := checkValue(fmt.Sprintf("%s[%d]", path, i), e); err != nil {
				return err
			}
		}
	}
	return nil
}

func derefAll(ps []*string) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		if p != nil {
			out[i] = *p
		}
	}
	return out
}

func checkValues(m map[string]*server.AttributeValue) error {
	for k, v := range m {
		if err := checkValue(k, v); err != nil {
			return err
		}
	}
	return nil
}
