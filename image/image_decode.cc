#include "image/image_decode.h"

#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <string>

#include <jpeglib.h>
#include <png.h>

namespace ds41::image {
namespace {

Status CheckSize(int64_t width, int64_t height, const ImageLimits& limits) {
  if (width < 1 || height < 1) return InvalidArgumentError("image has an empty size");
  if (width > limits.max_side || height > limits.max_side || width * height > limits.max_pixels) {
    return InvalidArgumentError("image of " + std::to_string(width) + "x" + std::to_string(height) +
                                " pixels is over the limits (" + std::to_string(limits.max_side) + " per side, " +
                                std::to_string(limits.max_pixels) + " pixels)");
  }
  return Status::Ok();
}

// ---- PNG -------------------------------------------------------------------------------------
// libpng reports errors by longjmp to png_jmpbuf. The functions that setjmp hold no C++ object
// with a destructor across a libpng call, so the jump skips nothing that must be cleaned up; the
// state they touch lives in PngState, owned by the caller.

struct PngSource {
  const uint8_t* data;
  size_t size, pos;
};

struct PngState {
  png_structp png = nullptr;
  png_infop info = nullptr;
  PngSource src{};
  char error[200] = {0};
  ~PngState() {
    if (png != nullptr) png_destroy_read_struct(&png, info != nullptr ? &info : nullptr, nullptr);
  }
};

void PngError(png_structp png, png_const_charp msg) {
  auto* st = static_cast<PngState*>(png_get_error_ptr(png));
  std::snprintf(st->error, sizeof(st->error), "%s", msg);
  png_longjmp(png, 1);
}
void PngWarning(png_structp, png_const_charp) {}  // PIL ignores warnings too

void PngRead(png_structp png, png_bytep out, png_size_t n) {
  auto* src = static_cast<PngSource*>(png_get_io_ptr(png));
  if (n > src->size - src->pos) png_error(png, "truncated PNG data");
  std::memcpy(out, src->data + src->pos, n);
  src->pos += n;
}

// Reads the header and sets the transforms; fills *rowbytes for the decoded rows. false on error.
bool PngReadInfo(PngState* st, png_uint_32* w, png_uint_32* h, int* channels, int* depth, size_t* rowbytes) {
  if (setjmp(png_jmpbuf(st->png))) return false;
  png_set_read_fn(st->png, &st->src, PngRead);
  png_read_info(st->png, st->info);
  *w = png_get_image_width(st->png, st->info);
  *h = png_get_image_height(st->png, st->info);
  const int color = png_get_color_type(st->png, st->info);
  const int bit_depth = png_get_bit_depth(st->png, st->info);
  if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(st->png);
  if (color == PNG_COLOR_TYPE_GRAY && bit_depth < 8) png_set_expand_gray_1_2_4_to_8(st->png);
  // 16-bit gray stays 16-bit (PIL reads it as mode I and clips to 255 on convert); every other
  // 16-bit image keeps its high byte, as PIL's ";16B" unpackers do.
  const bool gray16 = bit_depth == 16 && color == PNG_COLOR_TYPE_GRAY;
  if (bit_depth == 16 && !gray16) png_set_strip_16(st->png);
  if (gray16) png_set_swap(st->png);  // host-order uint16 (little-endian x86)
  png_set_interlace_handling(st->png);
  png_read_update_info(st->png, st->info);
  *channels = png_get_channels(st->png, st->info);
  *depth = png_get_bit_depth(st->png, st->info);
  *rowbytes = png_get_rowbytes(st->png, st->info);
  return true;
}

bool PngReadRows(PngState* st, png_bytep* rows) {
  if (setjmp(png_jmpbuf(st->png))) return false;
  png_read_image(st->png, rows);
  return true;
}

StatusOr<RgbImage> DecodePng(std::string_view bytes, const ImageLimits& limits, bool header_only) {
  PngState st;
  st.src = {reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), 0};
  st.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &st, PngError, PngWarning);
  if (st.png == nullptr) return InternalError("png_create_read_struct failed");
  st.info = png_create_info_struct(st.png);
  if (st.info == nullptr) return InternalError("png_create_info_struct failed");
  // libpng's own guards: sides, and ancillary chunks (compressed text, ICC) that inflate.
  png_set_user_limits(st.png, static_cast<png_uint_32>(limits.max_side), static_cast<png_uint_32>(limits.max_side));
  png_set_chunk_malloc_max(st.png, 8u << 20);
  png_uint_32 w = 0, h = 0;
  int channels = 0, depth = 0;
  size_t rowbytes = 0;
  if (!PngReadInfo(&st, &w, &h, &channels, &depth, &rowbytes)) {
    return InvalidArgumentError(std::string("invalid PNG: ") + st.error);
  }
  DS41_RETURN_IF_ERROR(CheckSize(w, h, limits));
  RgbImage img;
  img.width = static_cast<int>(w);
  img.height = static_cast<int>(h);
  if (header_only) return img;
  if (channels < 1 || channels > 4 || (depth != 8 && !(depth == 16 && channels == 1)) ||
      rowbytes < static_cast<size_t>(channels) * (depth / 8) * w) {
    return InvalidArgumentError("unsupported PNG pixel layout");
  }
  std::vector<uint8_t> raw(rowbytes * h);
  std::vector<png_bytep> rows(h);
  for (png_uint_32 y = 0; y < h; ++y) rows[y] = raw.data() + y * rowbytes;
  if (!PngReadRows(&st, rows.data())) return InvalidArgumentError(std::string("invalid PNG: ") + st.error);
  img.rgb.resize(static_cast<size_t>(w) * h * 3);
  uint8_t* out = img.rgb.data();
  for (png_uint_32 y = 0; y < h; ++y) {
    const uint8_t* in = rows[y];
    for (png_uint_32 x = 0; x < w; ++x, out += 3) {
      if (depth == 16) {  // gray16: PIL clips I to 8 bits
        uint16_t v;
        std::memcpy(&v, in + 2 * x, 2);
        out[0] = out[1] = out[2] = static_cast<uint8_t>(v > 255 ? 255 : v);
      } else if (channels <= 2) {  // gray (+ alpha, dropped)
        out[0] = out[1] = out[2] = in[x * channels];
      } else {  // RGB (+ alpha, dropped)
        std::memcpy(out, in + x * channels, 3);
      }
    }
  }
  return img;
}

// ---- JPEG ------------------------------------------------------------------------------------
// libjpeg's error_exit must not return; it longjmps back to the function that set the jump, which,
// as with PNG, holds no C++ object with a destructor across libjpeg calls.

struct JpegError {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void JpegErrorExit(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<JpegError*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}
void JpegOutputMessage(j_common_ptr) {}  // warnings (e.g. premature end) are not printed

struct JpegState {
  jpeg_decompress_struct cinfo{};
  JpegError err{};
  bool created = false;
  ~JpegState() {
    if (created) jpeg_destroy_decompress(&cinfo);
  }
};

bool JpegReadHeader(JpegState* st, const uint8_t* data, size_t size) {
  if (setjmp(st->err.jump)) return false;
  jpeg_create_decompress(&st->cinfo);
  st->created = true;
  jpeg_mem_src(&st->cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(&st->cinfo, TRUE);
  return true;
}

// Decodes into `out` (width * height * components bytes, already sized).
bool JpegReadPixels(JpegState* st, uint8_t* out, size_t stride) {
  if (setjmp(st->err.jump)) return false;
  jpeg_start_decompress(&st->cinfo);
  while (st->cinfo.output_scanline < st->cinfo.output_height) {
    JSAMPROW row = out + static_cast<size_t>(st->cinfo.output_scanline) * stride;
    jpeg_read_scanlines(&st->cinfo, &row, 1);
  }
  jpeg_finish_decompress(&st->cinfo);
  return true;
}

StatusOr<RgbImage> DecodeJpeg(std::string_view bytes, const ImageLimits& limits, bool header_only) {
  JpegState st;
  st.cinfo.err = jpeg_std_error(&st.err.mgr);
  st.err.mgr.error_exit = JpegErrorExit;
  st.err.mgr.output_message = JpegOutputMessage;
  if (!JpegReadHeader(&st, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size())) {
    return InvalidArgumentError(std::string("invalid JPEG: ") + st.err.message);
  }
  DS41_RETURN_IF_ERROR(CheckSize(st.cinfo.image_width, st.cinfo.image_height, limits));
  RgbImage img;
  img.width = static_cast<int>(st.cinfo.image_width);
  img.height = static_cast<int>(st.cinfo.image_height);
  if (header_only) return img;
  // PIL opens gray JPEGs as L and YCbCr/RGB ones as RGB (libjpeg converting, default ISLOW DCT
  // and fancy upsampling, which we keep); it reads CMYK/YCCK as CMYK, which we refuse.
  int components = 3;
  switch (st.cinfo.jpeg_color_space) {
    case JCS_GRAYSCALE:
      st.cinfo.out_color_space = JCS_GRAYSCALE;
      components = 1;
      break;
    case JCS_YCbCr:
    case JCS_RGB:
      st.cinfo.out_color_space = JCS_RGB;
      break;
    case JCS_CMYK:
    case JCS_YCCK:
      return InvalidArgumentError("CMYK JPEG images are not supported; convert the image to RGB");
    default:
      return InvalidArgumentError("JPEG color space is not supported");
  }
  const size_t stride = static_cast<size_t>(img.width) * components;
  std::vector<uint8_t> pixels(stride * img.height);
  if (!JpegReadPixels(&st, pixels.data(), stride)) {
    return InvalidArgumentError(std::string("invalid JPEG: ") + st.err.message);
  }
  if (st.cinfo.output_components != components) return InternalError("JPEG decoder returned unexpected components");
  if (components == 3) {
    img.rgb = std::move(pixels);
  } else {
    img.rgb.resize(pixels.size() * 3);
    for (size_t i = 0; i < pixels.size(); ++i) img.rgb[3 * i] = img.rgb[3 * i + 1] = img.rgb[3 * i + 2] = pixels[i];
  }
  return img;
}

StatusOr<RgbImage> Decode(std::string_view bytes, const ImageLimits& limits, bool header_only) {
  if (bytes.size() > limits.max_encoded_bytes) {
    return InvalidArgumentError("image is larger than " + std::to_string(limits.max_encoded_bytes) + " bytes");
  }
  DS41_ASSIGN_OR_RETURN(ImageFormat format, SniffImageFormat(bytes));
  return format == ImageFormat::kPng ? DecodePng(bytes, limits, header_only) : DecodeJpeg(bytes, limits, header_only);
}

}  // namespace

StatusOr<ImageHeader> ReadImageHeader(std::string_view bytes, const ImageLimits& limits) {
  DS41_ASSIGN_OR_RETURN(RgbImage img, Decode(bytes, limits, /*header_only=*/true));
  ImageHeader header;
  header.format = SniffImageFormat(bytes).value();
  header.width = img.width;
  header.height = img.height;
  return header;
}

StatusOr<RgbImage> DecodeImage(std::string_view bytes, const ImageLimits& limits) {
  return Decode(bytes, limits, /*header_only=*/false);
}

}  // namespace ds41::image
