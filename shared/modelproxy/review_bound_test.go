package modelproxy

import (
	"bytes"
	"encoding/base64"
	"image"
	"image/color"
	pngenc "image/png"
	"net/http"
	"strings"
	"testing"
)

// TestInputBoundHighResolutionImages: models from Claude Opus 4.7 on read
// an image at up to 2576 px on its long edge and 3.75 megapixels, which
// the API bills at about width x height / 750 tokens (a 28 px patch a
// token, the edges padded to a patch). A few hundred bytes of PNG at that
// size are reserved as at least what they are billed, not as an image
// scaled to the older 1568 px ceiling.
func TestInputBoundHighResolutionImages(t *testing.T) {
	t.Parallel()
	const w, h, window = 2576, 1456, 1_000_000
	var png bytes.Buffer
	img := image.NewPaletted(image.Rect(0, 0, w, h), color.Palette{color.White, color.Black})
	if err := (&pngenc.Encoder{CompressionLevel: pngenc.BestCompression}).Encode(&png, img); err != nil {
		t.Fatal(err)
	}
	block := `{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + base64.StdEncoding.EncodeToString(png.Bytes()) + `"}}`
	const images = 50
	body := `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[` + strings.TrimSuffix(strings.Repeat(block+",", images), ",") + `]}]}`
	in, ref := Inspect([]byte(body), http.Header{}, "")
	if ref != nil {
		t.Fatalf("refused: %s", ref.Message)
	}
	patches := int64((w+27)/28) * int64((h+27)/28)
	perImage := max(patches, int64(w*h/750+1))
	if input, _ := inputBound(in, len(body), window); input < images*perImage {
		t.Errorf("%d images of %dx%d in %d bytes reserved as %d input tokens, under the %d they may be billed", images, w, h, len(body), input, images*perImage)
	}
}
