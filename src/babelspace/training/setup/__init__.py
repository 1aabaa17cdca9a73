"""What happens before the first step: data, teacher targets, student and objective, projection fit,
optimiser and schedule."""
