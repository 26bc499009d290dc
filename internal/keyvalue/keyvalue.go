// Package keyvalue turns a value that an earlier handler stored in a
// request's context (an authenticated user's ID) into a limiter key, as
// httplimit.ByContext and grpclimit.ByContext do.
package keyvalue

import (
	"fmt"
	"strconv"
)

// String returns v as a key: a string as it is, an integer in decimal, a
// fmt.Stringer's String; "" for nil. A value of another type is an error
// saying so, to follow the context key's name.
func String(v any) (string, error) {
	switch v := v.(type) {
	case nil:
		return "", nil
	case string:
		return v, nil
	case int:
		return strconv.Itoa(v), nil
	case int64:
		return strconv.FormatInt(v, 10), nil
	case uint64:
		return strconv.FormatUint(v, 10), nil
	case fmt.Stringer:
		return v.String(), nil
	}
	return "", fmt.Errorf("is a %T, not a string, an integer or a fmt.Stringer", v)
}
