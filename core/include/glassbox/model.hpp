// The model seam in one include: config, file formats (ModelSource), typed weights, the transformer.
#pragma once
#include "glassbox/config.hpp"
#include "glassbox/model_source.hpp"
#include "glassbox/transformer.hpp"
#include "glassbox/weights.hpp"
