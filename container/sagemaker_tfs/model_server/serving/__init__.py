"""The core both front ends call: models loaded and served (servables, manager, batching)."""
