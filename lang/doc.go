// Package lang is the ffpf expression language: lexer, parser, AST,
// positioned errors, schema check and canonical printer.
//
// A request is one or more chains separated by ";". A chain is terms joined
// by ">", where every output of a term feeds every input of the next. A term
// is a function "(class,key=value,...)", a group "[chain | chain ...]" whose
// inputs and outputs are those of its alternatives (so "[X|Y] > Z" joins and
// "A > [X|Y]" forks), or a bare label naming a term labelled "label:" anywhere
// in the same request, which is how graphs that are not trees are written:
//
//	[[(dev,expr=eth0)|(dev,expr=eth1)] > (BPF,expr="tcp and dst port 80")] > [(pktcount)|(bytecount)]
//	x:(bpf,expr="tcp") > (pktcount); x > (bytecount)
//	(sample,rate=1ms,size=64KB,n=1M)
//
// Class names are case-insensitive. A value is a word (any run of characters
// other than white space and , ( ) [ ] | > ; = " : #), a double-quoted string
// with Go escapes, or a number: a word that matches -?digits[.digits] with an
// optional unit (ns us ms s m h, B KB MB GB, K M G; case matters, so "1m" is a
// minute and "1M" a million). Anything else, such as eth0, 10.0.0.1 or 1e5,
// is a word. "#" starts a comment to the end of the line, even in the middle
// of a word; quote values that contain it, or ":" (IPv6 and MAC addresses).
//
// The sharp edge: "(bpf,tcp)" is short for "(bpf,expr=tcp)" because a bare
// value binds to the class's first parameter, and which parameter that is
// only the function-class registry knows. The parser keeps such an argument
// with an empty Key; Check (given a Schema) validates it, and callers resolve
// it. Format prints it bare, so the canonical form does not name it either.
package lang
