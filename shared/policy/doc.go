// Package policy compiles fluidbox policy documents and answers, for one tool
// call, allow, deny or require_approval.
//
// What it guarantees:
//
//   - Precedence is by restriction, never by order: any matching deny beats
//     any matching require_approval, which beats any matching allow; with no
//     match the document's default_verdict applies.
//   - Matching is asymmetric so that an evasion never helps. Allow rules and
//     session grants match strictly: a Bash command only when it parses
//     (mvdan.cc/sh) as one plain command or a pipeline of them, each element
//     starting with an allowed prefix's literal words, with no list operator,
//     substitution, expansion, assignment, wrapper (env, sudo, xargs, sh -c,
//     find -exec, ...), git option that changes what runs, output
//     redirection to a file or here-document; a path only when its cleaned
//     form stays inside the working directory and matches the glob; input
//     pointers only when they resolve. Deny and require_approval rules match
//     conservatively: every simple command the line could run (inside
//     substitutions, re-parsed eval and sh -c strings, xargs and find -exec
//     targets, after stripping wrappers, program directories and git's
//     global options), any path that could reach the glob, and a Bash
//     command that cannot be analysed matches every command prefix.
//   - Fail closed: a Bash call whose command is missing or does not parse is
//     never allowed, whatever the rules and default say; a document with an
//     unknown field, verdict, scope, bad glob or pointer does not compile.
//   - A Policy is immutable and safe for concurrent use; Document returns a
//     deep copy of the normalized document and Digest a sha256 of its
//     canonical JSON, so a run's frozen snapshot can be verified later.
//
// The shell analysis lives in the subpackage bash, so that the parser's
// types never reach the gate.
package policy
