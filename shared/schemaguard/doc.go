// Package schemaguard turns an untrusted JSON Schema (a tool's input schema,
// photographed from an MCP server) into a compiled validator, and validates
// tool inputs against it.
//
// The schema comes from outside, so it is treated as hostile input. Before
// the JSON Schema engine sees it, a pre-guard checks that it:
//
//   - is a single JSON object of valid UTF-8, at most MaxSchemaBytes, with no
//     duplicate keys and at most MaxSchemaDepth levels of nesting;
//   - refers only to itself: every $ref, $dynamicRef and $recursiveRef starts
//     with "#" and resolves to a subschema or anchor of the same document, a
//     nested $id may only name an anchor, and $schema names a built-in draft;
//   - carries patterns, patternProperties keys and format names of at most
//     MaxKeywordBytes; every "pattern" compiles as ECMA-262 (regexp2 in
//     ECMAScript mode, as JSON Schema specifies), every patternProperties key
//     with Go's RE2 (the engine matches those itself, in linear time);
//   - gives no schema object more than MaxFanOut direct subschemas and
//     references, and does not use the keyword this package reserves;
//   - holds only numbers that fit comfortably in a float64 (huge exponents
//     make math/big slow or, in the engine, panic);
//   - does not expand, following $ref, into more than MaxExpandedSubschemas
//     subschemas (the "billion laughs" of JSON Schema).
//
// The engine is then told to load nothing from anywhere (its default loader
// reads file:// URLs), and it compiles the canonical form of the document, so
// the schema that is digested is exactly the schema that is enforced. Unknown
// formats are never asserted.
//
// Any violation, or any compiler failure, is a *RejectError: the tool is
// un-callable, which is the fail-closed answer. Inputs are bounded
// (MaxInputDepth, MaxInputStringBytes, MaxInputNodes) before validation, and a
// failed validation is an *InvalidError whose Reason lists every cause in a
// form a model can act on.
//
// Validation itself is metered: every subschema evaluation is charged to a
// budget of MaxWork steps, patterns to MaxPatternTime, and a validation that
// runs out is an *InvalidError too (the gate's schema-source deny), so no
// schema the pre-guard admits can make one call expensive.
//
// A schema of a simple subset (types, properties, required,
// additionalProperties, items, scalar enum and const, numeric, length and
// item-count bounds, uniqueItems, annotations; see fastSchema) is also
// compiled into a small tree that Validate walks first, without allocating.
// That walk can only accept: an input it cannot show valid goes to the
// engine, so rejections and their reasons are always the engine's. A fuzz
// test checks that the walk and the engine agree.
package schemaguard
