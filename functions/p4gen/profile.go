package p4gen

import (
	"fmt"
	"slices"
)

// Profile is what one switch pipeline offers, per match-action stage: the
// resources placement allocates to the functions it is offered, and the
// PISA model enforces. Memory is in blocks: an SRAM block is a RAM of
// SRAMDepth words of SRAMWidth bits (registers, exact-match tables,
// counters), a TCAM block TCAMDepth words of TCAMWidth bits (ternary,
// LPM and range keys).
type Profile struct {
	Stages     int   `yaml:"stages" json:"stages"`
	SRAMBlocks int   `yaml:"sram_blocks" json:"sram_blocks"` // per stage
	SRAMDepth  int   `yaml:"sram_depth" json:"sram_depth"`   // words per block
	SRAMWidth  int   `yaml:"sram_width" json:"sram_width"`   // bits per word
	TCAMBlocks int   `yaml:"tcam_blocks" json:"tcam_blocks"` // per stage
	TCAMDepth  int   `yaml:"tcam_depth" json:"tcam_depth"`
	TCAMWidth  int   `yaml:"tcam_width" json:"tcam_width"`
	ALUs       int   `yaml:"stateful_alus" json:"stateful_alus"` // stateful ALUs per stage: register accesses
	Tables     int   `yaml:"tables" json:"tables"`               // logical tables per stage
	Registers  []int `yaml:"register_widths" json:"register_widths"`
	// PairedWidth is a register width kept as a pair of cells of half
	// the width, updated by two ALUs (Tofino's 64-bit registers); 0 for
	// none.
	PairedWidth int `yaml:"paired_width" json:"paired_width"`
}

// Tofino1 is the default profile, after the open-sourced Tofino back end
// in p4lang/p4c: 12 stages; per stage 80 SRAM blocks of 1024×128 bits, 24
// TCAM blocks of 512×44 bits, 4 stateful ALUs and 16 logical tables;
// registers of 1, 8, 16 and 32 bits, 64 as a pair.
func Tofino1() Profile {
	return Profile{Stages: 12, SRAMBlocks: 80, SRAMDepth: 1024, SRAMWidth: 128,
		TCAMBlocks: 24, TCAMDepth: 512, TCAMWidth: 44, ALUs: 4, Tables: 16,
		Registers: []int{1, 8, 16, 32}, PairedWidth: 64}
}

// limits bounds each field: a profile outside them is a mistake (a
// switch with a million stages), refused with the field's name.
var limits = []struct {
	name     string
	get      func(*Profile) int
	min, max int
}{
	{"stages", func(p *Profile) int { return p.Stages }, 1, 64},
	{"sram_blocks", func(p *Profile) int { return p.SRAMBlocks }, 1, 4096},
	{"sram_depth", func(p *Profile) int { return p.SRAMDepth }, 16, 1 << 20},
	{"sram_width", func(p *Profile) int { return p.SRAMWidth }, 8, 1024},
	{"tcam_blocks", func(p *Profile) int { return p.TCAMBlocks }, 0, 4096},
	{"tcam_depth", func(p *Profile) int { return p.TCAMDepth }, 16, 1 << 20},
	{"tcam_width", func(p *Profile) int { return p.TCAMWidth }, 8, 1024},
	{"stateful_alus", func(p *Profile) int { return p.ALUs }, 1, 64},
	{"tables", func(p *Profile) int { return p.Tables }, 1, 1024},
}

// Validate checks every field is within reason, naming the first that is
// not.
func (p *Profile) Validate() error {
	for _, l := range limits {
		if v := l.get(p); v < l.min || v > l.max {
			return fmt.Errorf("resource %s: %d is out of range (%d to %d)", l.name, v, l.min, l.max)
		}
	}
	if len(p.Registers) == 0 {
		return fmt.Errorf("resource register_widths: none given")
	}
	for _, w := range p.Registers {
		if !slices.Contains([]int{1, 8, 16, 32, 64}, w) {
			return fmt.Errorf("resource register_widths: %d is not 1, 8, 16, 32 or 64", w)
		}
	}
	if p.PairedWidth != 0 && (p.PairedWidth != 64 || slices.Contains(p.Registers, 64) || !slices.Contains(p.Registers, 32)) {
		return fmt.Errorf("resource paired_width: %d must be 64, with 32-bit registers and no 64-bit ones", p.PairedWidth)
	}
	return nil
}

// SRAMBits is the SRAM of one stage, in bits.
func (p *Profile) SRAMBits() int64 {
	return int64(p.SRAMBlocks) * int64(p.SRAMDepth) * int64(p.SRAMWidth)
}

// RegisterWidth reports whether the switch keeps registers of w bits,
// and with how many stateful ALUs an access to one is made.
func (p *Profile) RegisterWidth(w int) (alus int, ok bool) {
	if slices.Contains(p.Registers, w) {
		return 1, true
	}
	if w == p.PairedWidth && w != 0 {
		return 2, true
	}
	return 0, false
}
