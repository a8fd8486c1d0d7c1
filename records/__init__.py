"""Records a run passes from stage to stage, free of Beam (the attempt)."""
