"""Models: teacher and student encoders as sentence-transformers models (loading, pooling, the
closed-form projection fit) and the fast CPU inference backends (ONNX Runtime, OpenVINO)."""
