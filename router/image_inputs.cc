#include "router/image_inputs.h"

#include "image/image_patches.h"
#include "image/image_source.h"

namespace ds41 {
namespace {

Status PartError(const std::string& field, const Status& s) {
  return Status(s.code() == StatusCode::kInternal ? StatusCode::kInternal : StatusCode::kInvalidArgument,
                field + ": " + s.message());
}

}  // namespace

StatusOr<std::vector<RequestImage>> DecodeRequestImages(const std::vector<chat::ChatImage>& parts,
                                                        const ImageInputOptions& options) {
  std::vector<RequestImage> images;
  if (parts.empty()) return images;
  if (!options.enabled) return InvalidArgumentError(parts[0].field + ": this model does not accept images");
  if (parts.size() > options.max_images) {
    return InvalidArgumentError(parts[options.max_images].field + ": at most " + std::to_string(options.max_images) +
                                " images per request");
  }
  // Every file and header first: a request over its pixel budget is refused before any decoding.
  std::vector<std::string> files;
  files.reserve(parts.size());
  int64_t pixels = 0;
  for (const chat::ChatImage& part : parts) {
    auto bytes = image::ParseImageDataUrl(part.url, options.limits);
    if (!bytes.ok()) return PartError(part.field, bytes.status());
    auto header = image::ReadImageHeader(*bytes, options.limits);
    if (!header.ok()) return PartError(part.field, header.status());
    pixels += static_cast<int64_t>(header->width) * header->height;
    if (pixels > options.max_request_pixels) {
      return InvalidArgumentError(part.field + ": the request's images hold " + std::to_string(pixels) +
                                  " pixels up to here, over the " + std::to_string(options.max_request_pixels) +
                                  " one request may have decoded");
    }
    files.push_back(std::move(*bytes));
  }
  images.reserve(parts.size());
  for (size_t k = 0; k < parts.size(); ++k) {
    const chat::ChatImage& part = parts[k];
    auto rgb = image::DecodeImage(files[k], options.limits);
    files[k] = {};
    if (!rgb.ok()) return PartError(part.field, rgb.status());
    auto plan = image::PlanImageGrid(rgb->width, rgb->height, options.geometry);
    if (!plan.ok()) return PartError(part.field, plan.status());
    RequestImage img;
    img.field = part.field;
    img.hash = image::ImageContentHash(*rgb, *plan);
    // Only the fitted picture is kept (at most the plan's size): a request's images never hold more
    // than one decoded original at a time, however large the originals.
    auto fitted = image::FitToPlan(*rgb, *plan);
    if (!fitted.ok()) return PartError(part.field, fitted.status());
    img.fitted = std::move(*fitted);
    img.plan = *plan;
    images.push_back(std::move(img));
  }
  return images;
}

std::string ImageErrorField(const Status& s) {
  const std::string& m = s.message();
  const size_t colon = m.find(": ");
  return colon == std::string::npos ? std::string() : m.substr(0, colon);
}

StatusOr<ImagePrompt> ExpandRequestImages(std::span<const int32_t> prompt, std::vector<RequestImage> images,
                                          const ImageInputOptions& options) {
  std::vector<image::PlannedImage> planned;
  planned.reserve(images.size());
  for (const RequestImage& img : images) planned.push_back({img.plan, img.hash});
  DS41_ASSIGN_OR_RETURN(image::ExpandedPrompt expanded,
                        image::ExpandImageTokens(prompt, options.image_token_id, planned));
  ImagePrompt out;
  out.tokens = std::move(expanded.tokens);
  out.types = std::move(expanded.types);
  out.spans = std::move(expanded.spans);
  out.images = std::move(images);
  return out;
}

StatusOr<std::vector<PromptImage>> PromptImagesOf(ImagePrompt& prompt) {
  std::vector<PromptImage> out;
  out.reserve(prompt.images.size());
  for (size_t k = 0; k < prompt.images.size(); ++k) {
    RequestImage& img = prompt.images[k];
    const image::ImageSpan& span = prompt.spans[k];
    PromptImage p;
    p.start = span.start;
    p.n_vit_h = img.plan.n_vit_h;
    p.n_vit_w = img.plan.n_vit_w;
    p.hash = span.hash;
    p.pixels.assign(img.fitted.rgb.begin(), img.fitted.rgb.end());
    img.fitted = {};  // what travels is the copy
    const int64_t n = image::NumImageTokens(img.plan);
    for (int64_t j = 0; j < n; ++j) prompt.tokens[static_cast<size_t>(span.start + j)] = ImageKeyToken(span.hash, j);
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace ds41
