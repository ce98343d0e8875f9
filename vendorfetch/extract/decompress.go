// Package extract unpacks vendor archives (tar.gz, tar.xz, tar.zst, or a
// plain tar) into a staging directory without ever writing outside it.
//
// The archives come from the network, so every member is hostile until
// shown otherwise: absolute names, ".." components, links that leave the
// tree, hardlinks to members that are not there, device, fifo and socket
// entries and duplicate names are refused with an error naming the member;
// output beyond a limit stops a decompression bomb; setuid and setgid bits
// are stripped and reported; owners are never restored (archive members
// carry uid 1001, and a rootless container denies the chown anyway).
// Decoders run with memory caps so a hostile header cannot make them
// allocate gigabytes.
package extract

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"
)

// Format names an archive's compression.
type Format string

// Formats the extractor reads.
const (
	Tar  Format = "tar"
	Gzip Format = "gzip"
	Zstd Format = "zstd"
	XZ   Format = "xz"
)

// Memory caps of the decoders. Vendor archives use far smaller windows
// (zstd -19 uses 8 MiB, xz -9 64 MiB); anything larger is refused rather
// than allocated.
const (
	MaxZstdWindow = 64 << 20
	MaxXZDict     = 64 << 20
)

var (
	magicGzip = []byte{0x1f, 0x8b}
	magicZstd = []byte{0x28, 0xb5, 0x2f, 0xfd}
	magicXZ   = []byte{0xfd, '7', 'z', 'X', 'Z', 0x00}
)

// Detect names the format of the stream that br starts with.
func Detect(br *bufio.Reader) (Format, error) {
	head, _ := br.Peek(512)
	switch {
	case bytes.HasPrefix(head, magicGzip):
		return Gzip, nil
	case bytes.HasPrefix(head, magicZstd):
		return Zstd, nil
	case bytes.HasPrefix(head, magicXZ):
		return XZ, nil
	case len(head) >= 262 && bytes.Equal(head[257:262], []byte("ustar")):
		return Tar, nil
	case len(head) == 0:
		return "", errors.New("the archive is empty")
	}
	return "", errors.New("the archive is not a tar, tar.gz, tar.xz or tar.zst (unknown leading bytes)")
}

// Decompress returns the decompressed stream of r, whatever its format
// (a plain tar is passed through). The caller closes the result.
func Decompress(r io.Reader) (io.ReadCloser, Format, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	f, err := Detect(br)
	if err != nil {
		return nil, "", err
	}
	rc, err := NewReader(br, f)
	return rc, f, err
}

// NewReader decodes r as format f, with the decoders' memory caps.
func NewReader(r io.Reader, f Format) (io.ReadCloser, error) {
	switch f {
	case Tar:
		return io.NopCloser(r), nil
	case Gzip:
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		return zr, nil
	case Zstd:
		zr, err := NewZstdReader(r)
		if err != nil {
			return nil, err
		}
		return zr.IOReadCloser(), nil
	case XZ:
		br, ok := r.(*bufio.Reader)
		if !ok {
			br = bufio.NewReaderSize(r, 64<<10)
		}
		if err := checkXZDict(br); err != nil {
			return nil, err
		}
		xr, err := xz.ReaderConfig{DictCap: 1 << 20}.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("xz: %w", err)
		}
		return io.NopCloser(xr), nil
	}
	return nil, fmt.Errorf("unknown archive format %q", f)
}

// NewZstdReader is a single-threaded zstd decoder whose window (and so its
// memory) is capped at MaxZstdWindow.
func NewZstdReader(r io.Reader) (*zstd.Decoder, error) {
	zr, err := zstd.NewReader(r,
		zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderLowmem(true),
		zstd.WithDecoderMaxWindow(MaxZstdWindow),
		zstd.WithDecoderMaxMemory(MaxZstdWindow))
	if err != nil {
		return nil, fmt.Errorf("zstd: %w", err)
	}
	return zr, nil
}

// checkXZDict reads the first block header's LZMA2 dictionary size and
// refuses one above MaxXZDict. The xz decoder takes the header's size as
// given (its DictCap is a minimum, not a cap), so without this a hostile
// header could ask for a 4 GiB dictionary. xz writes one block per stream
// unless run with threads, and then every block has the same filter.
func checkXZDict(br *bufio.Reader) error {
	// stream header (12) + block header size byte + flags + up to two
	// varints of 9 bytes + filter id/props varints: 48 bytes is plenty.
	h, _ := br.Peek(48)
	if len(h) < 14 || !bytes.HasPrefix(h, magicXZ) {
		return nil // let the decoder report the malformed stream
	}
	b := h[12:]
	if b[0] == 0 {
		return nil // an index right away: no blocks
	}
	flags := b[1]
	p := 2
	skip := func() bool {
		_, n := binary.Uvarint(b[p:])
		if n <= 0 {
			return false
		}
		p += n
		return true
	}
	if flags&0x40 != 0 && !skip() {
		return nil
	}
	if flags&0x80 != 0 && !skip() {
		return nil
	}
	nf := int(flags&0x03) + 1
	for i := 0; i < nf && p < len(b); i++ {
		id, n := binary.Uvarint(b[p:])
		if n <= 0 {
			return nil
		}
		p += n
		size, n := binary.Uvarint(b[p:])
		if n <= 0 || p+n+int(size) > len(b) {
			return nil
		}
		p += n
		if id == 0x21 && size == 1 {
			code := b[p]
			if code > 40 {
				return fmt.Errorf("xz: dictionary size code %d is invalid", code)
			}
			dict := uint64(2|code&1) << (code/2 + 11)
			if code == 40 {
				dict = 1<<32 - 1
			}
			if dict > MaxXZDict {
				return fmt.Errorf("xz: the stream asks for a %d MiB dictionary, more than the %d MiB this extractor allows (recompress with xz -6 or less)", dict>>20, MaxXZDict>>20)
			}
		}
		p += int(size)
	}
	return nil
}
